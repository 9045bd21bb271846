"""benchmarks.studies.dropout_noise: the ratio is zero without dropout and positive with it; the mean cosine helper."""
import pytest
import torch

from benchmarks.studies.dropout_noise import mean_pairwise_cosine, noise_ratio

SENTENCES = ["a man plays a guitar .", "a dog runs in the park .", "the cat sleeps .", "two people talk ."]


def test_dropout_moves_vectors_and_cosines_are_in_range(tiny_encoder):
    mean_cos, ratio = noise_ratio(tiny_encoder, SENTENCES, "cls")
    assert -1.0 <= mean_cos <= 1.0 and ratio > 0.0
    tiny_encoder.model.config.hidden_dropout_prob = 0.0
    for module in tiny_encoder.model.modules():
        if module.__class__.__name__ == "Dropout":
            module.p = 0.0
    tiny_encoder.model.config._attn_implementation = "eager"
    assert noise_ratio(tiny_encoder, SENTENCES, "mean")[1] < 1e-5


def test_mean_pairwise_cosine_leaves_the_diagonal_out():
    same = torch.ones(5, 3)
    assert mean_pairwise_cosine(same) == pytest.approx(1.0)
    orthogonal = torch.eye(4)
    assert mean_pairwise_cosine(orthogonal) == pytest.approx(0.0)
    opposite = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    assert mean_pairwise_cosine(opposite) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="at least 2"):
        mean_pairwise_cosine(torch.ones(1, 3))
