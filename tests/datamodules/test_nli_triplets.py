"""NLI triplets (datamodules.nli_triplets) and NLIDataModule(format="triplets")."""

from __future__ import annotations

import pytest

from sts_lightning.datamodules.nli import NLIDataModule
from sts_lightning.datamodules.nli_readers import NLIPairs
from sts_lightning.datamodules.nli_triplets import build_triplets
from sts_lightning.embeddings.errors import ConfigError, DataError
from tests.helpers import write_senteval

ROWS = [("p1", "e1a", 0), ("p1", "n1", 1), ("p1", "c1", 2), ("p1", "e1b", 0),
        ("p2", "e2", 0), ("p2", "n2", 1),  # no contradiction: its entailment is counted, not used
        ("p3", "c3a", 2), ("p3", "e3", 0), ("p3", "c3b", 2)]


def pairs(rows) -> NLIPairs:
    return NLIPairs([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])


def test_one_triplet_per_entailment_with_a_contradiction_of_the_same_premise():
    t = build_triplets([pairs(ROWS[:5]), pairs(ROWS[5:])])  # a premise may span sources
    assert list(zip(t.anchors, t.positives, t.negatives, strict=True)) == [
        ("p1", "e1a", "c1"), ("p1", "e1b", "c1"), ("p3", "e3", "c3a")]
    assert t.without_negative == 1


def test_no_triplet_is_a_clear_error():
    with pytest.raises(DataError, match="data.format=pairs"):
        build_triplets([pairs([("p", "e", 0), ("p", "n", 1)])])


def test_datamodule_serves_triplet_batches(tmp_path):
    label = {0: "entailment", 1: "neutral", 2: "contradiction"}
    write_senteval(tmp_path, "dev", [(a, b, label[y]) for a, b, y in ROWS])
    dm = NLIDataModule(str(tmp_path), "snli:dev", batch_size=2, seed=0, format="triplets", shuffle=False)
    batches = list(dm.train_dataloader())
    assert [b["anchors"] for b in batches] == [["p1", "p1"], ["p3"]]
    assert batches[0]["positives"] == ["e1a", "e1b"] and batches[1]["negatives"] == ["c3a"]
    with pytest.raises(ConfigError, match="unknown NLI data format 'pair'"):
        NLIDataModule(str(tmp_path), "snli:dev", format="pair")


def test_mnrl_objective_trains_on_triplets_and_names_the_wrong_format(tiny_model_dir):
    from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule

    module = SBERTNLIModule(str(tiny_model_dir), max_length=16, objective="mnrl")
    module.log = lambda *args, **kwargs: None  # no trainer attached
    assert module.classifier is None
    batch = {"anchors": ["p1", "p3"], "positives": ["e1a", "e3"], "negatives": ["c1", "c3a"]}
    loss = module.training_step(batch, 0)
    loss.backward()
    assert loss.isfinite() and module.encoder_model.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    with pytest.raises(ConfigError, match="data.format=triplets"):
        module.training_step({"sentences1": ["a"], "sentences2": ["b"], "labels": None}, 0)
    with pytest.raises(ConfigError, match="unknown SBERT-NLI objective"):
        SBERTNLIModule(str(tiny_model_dir), objective="triplet")
