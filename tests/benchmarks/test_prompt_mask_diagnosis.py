"""The [MASK] diagnosis: its cosine summary on known vectors, and the whole run on the tiny masked LM."""

from __future__ import annotations

import pytest
import torch

from benchmarks import prompt_mask_diagnosis as diagnosis


def test_mean_pairwise_cosine_leaves_the_diagonal_out():
    same = torch.ones(5, 3)
    assert diagnosis.mean_pairwise_cosine(same) == pytest.approx(1.0)
    orthogonal = torch.eye(4)
    assert diagnosis.mean_pairwise_cosine(orthogonal) == pytest.approx(0.0)
    opposite = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    assert diagnosis.mean_pairwise_cosine(opposite) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="at least 2"):
        diagnosis.mean_pairwise_cosine(torch.ones(1, 3))


def test_the_diagnosis_runs_on_a_masked_lm(tiny_model_dir, tiny_data_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    mlm = f"{tiny_model_dir}-mlm"
    sentences = diagnosis.stsb_dev_sentences(str(tiny_data_dir), 6)
    assert len(sentences) == len(set(sentences)) >= 3
    result = diagnosis.main([mlm, "--sentences", "6", "--data-dir", str(tiny_data_dir)])
    assert set(result["cosine"]) == {"cls", "mean", "prompt", "prompt_denoise"}
    assert all(-1.0 <= v <= 1.0 for v in result["cosine"].values())
    counts = diagnosis.mask_predictions(mlm, sentences)
    assert sum(counts.values()) == len(sentences)  # one [MASK] a sentence, one arg-max each
    assert result["mask"]["distinct"] == len(counts)
    assert result["mask"]["top_share"] == pytest.approx(counts.most_common(1)[0][1] / len(sentences))
