"""Sen2Pro over a BERT-whitening export (Sen2Pro Table 1, "BERT-whitening + Ours"): samples whitened before the moments."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.encoder_identity import encoder_identity
from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.embeddings.methods.sen2pro.augment import augment
from sts_lightning.embeddings.methods.sen2pro.scorer import Sen2ProScorer
from sts_lightning.embeddings.methods.whitening.maths import fit_whitening, moment_sums
from sts_lightning.embeddings.methods.whitening.scorer import Whitening, save_whitening_export
from sts_lightning.embeddings.scoring.registry import build_scorer

SENTENCES = ["a man plays a guitar .", "a dog runs in the park .", "a woman cuts an onion .",
             "two children kick a ball .", "the man plays the piano", "a child reads a book ."]


@pytest.fixture()
def export(tiny_encoder, tmp_path):
    """A whitening (k = 16 of 32) fitted on the tiny encoder's first-last-avg vectors, exported."""
    x = tiny_encoder.encode([f"{s} {i}" for i in range(10) for s in SENTENCES], get_pooling("first_last_avg"))
    mean, matrix = fit_whitening(moment_sums(x), 16)
    config = {"model_name_or_path": tiny_encoder.name, "pooling": "first_last_avg", "max_length": 32, "k": 16,
              "encoder": encoder_identity(tiny_encoder)}
    return save_whitening_export(tmp_path / "whitening", Whitening(mean.float(), matrix.float(), config))


def test_samples_are_whitened_before_the_moments(tiny_encoder, export, one_thread):
    plain = Sen2ProScorer(tiny_encoder, n_samples=3, uncertainty="data", seed=1).represent(SENTENCES)
    scorer = Sen2ProScorer(tiny_encoder, n_samples=3, uncertainty="data", seed=1, whitening=str(export))
    white = scorer.represent(SENTENCES)
    assert white["mean"].shape == white["var"].shape == (len(SENTENCES), 16)
    # The map is affine, so the mean of whitened samples is the whitened mean (float32, sums of 32 terms)...
    expected = scorer.whitening(plain["mean"])
    tol = torch.finfo(torch.float32).eps * 32 * 4 * float(expected.abs().max())
    torch.testing.assert_close(white["mean"], expected, atol=tol, rtol=0)
    # ...but the variance is that of the whitened samples, not anything of the plain banded variance.
    # The same samples (all copies in one encode call, as the scorer batches them), float64 moments on both
    # sides: the results differ by the float32 rounding of the result at most.
    flat = [c for row in augment(SENTENCES, 3, 1) for c in row]
    samples = scorer._encode(flat).view(len(SENTENCES), 3, -1)
    want = samples.double().var(1, unbiased=False).float()
    torch.testing.assert_close(white["var"], want, rtol=2 * torch.finfo(torch.float32).eps, atol=0)
    assert not torch.allclose(white["var"][:, :4], plain["var"][:, :4])


def test_registry_spec_and_pooling_or_encoder_mismatch(tiny_encoder, export, tmp_path):
    scorer = build_scorer({"name": "sen2pro", "whitening": str(export), "n_samples": 2, "uncertainty": "data"},
                          tiny_encoder)
    assert scorer.whitening is not None
    with pytest.raises(ConfigError, match=r"sen2pro pooling='mean', but whitening export .* fitted on 'first_last_avg'"):
        Sen2ProScorer(tiny_encoder, pooling="mean", whitening=str(export))
    with torch.no_grad():
        next(tiny_encoder.model.parameters())[0, 0] += 1.0  # other weights, same width
    with pytest.raises(ConfigError, match="other weights"):
        Sen2ProScorer(tiny_encoder, whitening=str(export))
