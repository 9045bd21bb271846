"""The masked LM's two starts: a seeded random BERT of any size, or an encoder with (or given) an MLM head."""

from __future__ import annotations

import logging

import pytest
import torch

from sts_lightning.embeddings.encoders.packaged import bert_uncased_tokenizer_dir
from sts_lightning.embeddings.encoders.random_bert import make_random_bert
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.mlm.masked_lm import (
    SCRATCH,
    load_masked_lm,
    mlm_head,
    scratch_label,
    scratch_masked_lm,
    scratch_spec,
)

TINY = {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64, "max_positions": 64}


def test_from_scratch_spec_fills_defaults_and_names_a_bad_key():
    assert scratch_spec(None) is None and scratch_spec(True) == SCRATCH
    assert scratch_spec({"layers": 6}) == {**SCRATCH, "layers": 6}
    for bad, key in [({"layer": 6}, "from_scratch.layer"), ({"hidden": 0}, "from_scratch.hidden=0"),
                     ({"heads": 3}, "from_scratch.hidden=256 must be divisible"), ({"seed": 1.5}, "seed=1.5"),
                     ("big", "from_scratch='big'")]:
        with pytest.raises(ConfigError, match=key):
            scratch_spec(bad)
    assert "random BERT 4x256" in scratch_label(SCRATCH)


def test_a_random_bert_from_scratch_is_seeded_tied_and_leaves_the_global_rng_alone():
    before = torch.random.get_rng_state()
    a, tokenizer = scratch_masked_lm({**SCRATCH, **TINY})
    assert torch.equal(torch.random.get_rng_state(), before)
    b, _ = scratch_masked_lm({**SCRATCH, **TINY})
    c, _ = scratch_masked_lm({**SCRATCH, **TINY, "seed": 1})
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    query = [m.bert.encoder.layer[0].attention.self.query.weight for m in (a, c)]
    assert not torch.equal(*query)
    assert a.config.vocab_size == len(tokenizer) == 30522 and a.config.num_hidden_layers == 1
    assert a.cls.predictions.decoder.weight is a.bert.embeddings.word_embeddings.weight
    assert mlm_head(a) is a.cls


def test_from_scratch_trains_the_random_bert_the_packaged_builder_draws_plus_its_pooler(tmp_path):
    from transformers import AutoModel

    model, _ = scratch_masked_lm({**SCRATCH, **TINY, "seed": 3})
    reference = AutoModel.from_pretrained(make_random_bert(tmp_path, bert_uncased_tokenizer_dir(), seed=3, **{
        "layers": 1, "hidden": 32, "heads": 2, "intermediate": 64, "max_positions": 64}))
    mine = model.bert.state_dict()
    assert mine.keys() == reference.state_dict().keys()  # the pooler too: AutoModel loads the export whole
    assert all(torch.equal(v, mine[k]) for k, v in reference.state_dict().items())
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight


def test_an_encoder_without_an_mlm_head_gets_a_tied_new_one(tiny_model_dir, caplog):
    with caplog.at_level(logging.INFO):
        model, tokenizer = load_masked_lm(str(tiny_model_dir))
    assert "has no MLM head" in caplog.text
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    from transformers import AutoModel

    assert torch.equal(model.bert.pooler.dense.weight, AutoModel.from_pretrained(tiny_model_dir).pooler.dense.weight)
    with pytest.raises(ConfigError, match="could not load a masked LM from model.model_name_or_path="):
        load_masked_lm(str(tiny_model_dir / "nowhere"))
