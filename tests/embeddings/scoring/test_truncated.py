"""``embeddings.scoring.truncated``: the first d numbers of a vector scorer compared by cosine, refusals for scorers
without one vector or with fewer numbers, ``dims`` checked in one line naming the key, and ``load(dim=...)``."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError, UnsupportedError
from sts_lightning.embeddings.scoring.scorer import Scorer, VectorScorer
from sts_lightning.embeddings.scoring.similarity import cosine_rows
from sts_lightning.embeddings.scoring.truncated import TruncatedScorer, check_dims, truncate


class Fixed(VectorScorer):
    name = "fixed"

    def represent(self, sentences):
        torch.manual_seed(len(sentences))
        return {"embedding": torch.randn(len(sentences), 12)}


class TwoTensors(Scorer):
    name = "pair"

    def represent(self, sentences):
        return {"mean": torch.zeros(len(sentences), 4), "var": torch.ones(len(sentences), 4)}

    def similarity(self, a, b):
        return torch.zeros(a["mean"].shape[0])


def test_the_prefix_by_cosine():
    cut = truncate(Fixed(), 5)
    assert cut.name == "fixed@5"
    full = Fixed().represent(["a", "b", "c"])["embedding"]
    got = cut.represent(["a", "b", "c"])["embedding"]
    torch.testing.assert_close(got, full[:, :5])
    torch.testing.assert_close(cut.similarity({"embedding": got[:2]}, {"embedding": got[1:]}),
                               cosine_rows(full[:2, :5], full[1:, :5]))


def test_scorers_that_cannot_be_cut_are_unsupported():
    with pytest.raises(UnsupportedError, match="pair does not compare one vector by cosine"):
        truncate(TwoTensors(), 2)
    with pytest.raises(UnsupportedError, match="13 is larger than fixed's 12-d vectors"):
        truncate(Fixed(), 13)
    assert isinstance(truncate(Fixed(), 12), TruncatedScorer)


@pytest.mark.parametrize("dims, match", [([8, 0], "must be a list of integers > 0"), ("8", "integers > 0"),
                                         ([8, 8], "repeats"), ([True], "integers > 0")])
def test_bad_dims_name_the_key(dims, match):
    with pytest.raises(ConfigError, match=f"dims=.*{match}"):
        check_dims(dims)
    assert check_dims(None) == () and check_dims(64) == (64,) and check_dims([64, 128]) == (64, 128)


def test_load_dim_encodes_the_prefix(tiny_model_dir):
    import sts_lightning as sl

    full, cut = sl.load(str(tiny_model_dir)), sl.load(str(tiny_model_dir), dim=8)
    sentences = ["a man plays a guitar .", "a dog runs ."]
    torch.testing.assert_close(cut.encode(sentences), full.encode(sentences)[:, :8])
    with pytest.raises(ConfigError, match=r"load\(dim\)=0"):
        sl.load(str(tiny_model_dir), dim=0)
