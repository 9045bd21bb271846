"""The [MASK] diagnosis: the whole run on the tiny masked LM."""

from __future__ import annotations

import pytest

from benchmarks.studies import prompt_mask_diagnosis as diagnosis
from benchmarks.studies.dropout_noise import distinct_first_sentences
from sts_lightning.sts.tasks import load_task


def test_the_diagnosis_runs_on_a_masked_lm(tiny_model_dir, tiny_data_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    mlm = f"{tiny_model_dir}-mlm"
    sentences = distinct_first_sentences(load_task("stsb-dev", str(tiny_data_dir)), 6)
    assert len(sentences) == len(set(sentences)) >= 3
    result = diagnosis.main([mlm, "--sentences", "6", "--data-dir", str(tiny_data_dir)])
    assert set(result["cosine"]) == {"cls", "mean", "prompt", "prompt_denoise"}
    assert all(-1.0 <= v <= 1.0 for v in result["cosine"].values())
    counts = diagnosis.mask_predictions(mlm, sentences)
    assert sum(counts.values()) == len(sentences)  # one [MASK] a sentence, one arg-max each
    assert result["mask"]["distinct"] == len(counts)
    assert result["mask"]["top_share"] == pytest.approx(counts.most_common(1)[0][1] / len(sentences))
