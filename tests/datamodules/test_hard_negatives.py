"""Mined hard negatives choose what sentence-transformers' ``util.mine_hard_negatives`` chooses.

The oracle is sentence-transformers itself (installed in the venv; ``sentence_transformers/util/hard_negatives.py``,
``output_format="triplet"``), run on the very embeddings ours uses (a duck-typed model returning them), so the test
compares the selection rules (ranks, margins, sampling) exactly; a second test runs it with a real
``SentenceTransformer`` over the same tiny BERT, the whole path from text to triplets.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from sts_lightning.datamodules.hard_negatives import MiningOptions, mine_triplets
from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import MINING_ANCHORS as ANCHORS
from tests.helpers import MINING_POSITIVES as POSITIVES

CASES = {
    "defaults": MiningOptions(),
    "window": MiningOptions(range_min=2, range_max=9, num_negatives=2),
    "absolute": MiningOptions(absolute_margin=0.002, num_negatives=2),
    "relative": MiningOptions(relative_margin=0.003, range_max=15, num_negatives=4),
    "random": MiningOptions(range_min=1, range_max=10, num_negatives=3, sampling="random", seed=7),
}


class _Embedded:
    """The part of ``SentenceTransformer`` that ``mine_hard_negatives`` calls, answering with given embeddings."""

    device = torch.device("cpu")

    def __init__(self, embed):
        self.embed = embed

    def encode_document(self, texts, **kwargs):
        return torch.nn.functional.normalize(self.embed(list(texts)), dim=-1).numpy()

    encode_query = encode_document

    def similarity(self, a, b):
        from sentence_transformers.util import cos_sim
        return cos_sim(a, b)

    def similarity_pairwise(self, a, b):
        from sentence_transformers.util import pairwise_cos_sim
        return pairwise_cos_sim(torch.as_tensor(np.asarray(a)), torch.as_tensor(np.asarray(b)))


def reference(model, options: MiningOptions) -> list[tuple[str, str, str]]:
    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives

    random.seed(options.seed)  # sentence-transformers samples with the module-level ``random``
    out = mine_hard_negatives(Dataset.from_dict({"anchor": ANCHORS, "positive": POSITIVES}), model,
                              range_min=options.range_min, range_max=options.range_max,
                              absolute_margin=options.absolute_margin, relative_margin=options.relative_margin,
                              num_negatives=options.num_negatives, sampling_strategy=options.sampling,
                              output_format="triplet", verbose=False)
    return list(zip(out["anchor"], out["positive"], out["negative"], strict=True))


def ours(embed, options: MiningOptions) -> list[tuple[str, str, str]]:
    t = mine_triplets(ANCHORS, POSITIVES, embed, options)
    return list(zip(t.anchors, t.positives, t.negatives, strict=True))


@pytest.fixture()
def pooled(tiny_encoder):
    from sts_lightning.embeddings.methods.pooling import PoolingScorer

    scorer = PoolingScorer(tiny_encoder, "mean")
    return lambda texts: scorer.represent(texts)["embedding"].float().cpu()


@pytest.mark.parametrize("case", CASES)
def test_same_triplets_as_sentence_transformers_on_the_same_embeddings(pooled, case):
    want = reference(_Embedded(pooled), CASES[case])
    got = ours(pooled, CASES[case])
    assert want, "the case must mine something to compare"
    if case in ("absolute", "relative"):  # the margin bites: some slots dropped, so the rule itself is compared
        assert len(want) < len(ANCHORS) * CASES[case].num_negatives
    assert got == want


def test_same_triplets_as_a_sentence_transformer_over_the_same_bert(tiny_model_dir, pooled):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    bert = Transformer(str(tiny_model_dir), max_seq_length=32)
    st = SentenceTransformer(modules=[bert, Pooling(bert.get_embedding_dimension(), "mean")],
                             device="cpu")
    assert ours(pooled, CASES["window"]) == reference(st, CASES["window"])


def test_margins_drop_negatives_too_close_to_the_positive():
    vectors = {"q": [1.0, 0.0], "pos": [0.9, 0.1], "near": [0.95, 0.05], "far": [0.5, 0.5], "other": [0.0, 1.0]}
    embed = lambda texts: torch.tensor([vectors[t] for t in texts])  # noqa: E731
    anchors, positives = ["q", "x1", "x2", "x3"], ["pos", "near", "far", "other"]
    vectors.update(x1=[0.0, 1.0], x2=[0.0, 1.0], x3=[1.0, 0.0])
    top = mine_triplets(anchors, positives, embed, MiningOptions(num_negatives=1))
    assert top.negatives[0] == "near"  # closer to q than its own positive: the hardest, and a likely false negative
    kept = mine_triplets(anchors, positives, embed, MiningOptions(num_negatives=1, absolute_margin=0.0))
    assert kept.negatives[0] == "far"
    kept = mine_triplets(anchors, positives, embed, MiningOptions(num_negatives=1, relative_margin=0.1))
    assert kept.negatives[0] == "far"


@pytest.mark.parametrize(("options", "named"), [
    (MiningOptions(range_min=5, range_max=5), "--range-min (5) must be smaller than --range-max (5)"),
    (MiningOptions(range_min=-1), "--range-min must be >= 0"),
    (MiningOptions(absolute_margin=-0.1), "--absolute-margin must be >= 0"),
    (MiningOptions(relative_margin=1.0), "--relative-margin must be in [0, 1)"),
    (MiningOptions(relative_margin=-0.5), "--relative-margin must be in [0, 1)"),
    (MiningOptions(num_negatives=0), "--num-negatives must be at least 1"),
    (MiningOptions(range_max=3, num_negatives=4), "--num-negatives 4 is more than the 3 ranks"),
    (MiningOptions(sampling="best"), "--sampling"),
])
def test_bad_options_are_one_line_naming_the_option(options, named):
    with pytest.raises(ConfigError) as err:
        options.check()
    assert named in str(err.value) and "\n" not in str(err.value)
