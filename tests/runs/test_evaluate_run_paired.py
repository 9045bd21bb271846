"""Two variants of one scorer get two labels; an evaluate run keeps every row's per-pair similarities and its
results.md gives the paired differences to the first row; compare_runs reads them back."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import spearmanr

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.scoring.registry import distinct_labels
from tests.helpers import compose_evaluate_config


def test_variants_of_one_scorer_are_labelled_by_the_options_that_differ():
    assert distinct_labels(["prompt", {"name": "prompt", "denoise": True}]) == ["prompt", "prompt(denoise=true)"]
    assert distinct_labels(["mean"]) == ["mean"]  # one spec: its plain name, as tables and caches know it
    assert distinct_labels([{"name": "prompt", "template": "T [X] [MASK]."}]) == ["prompt"]
    assert distinct_labels([{"name": "prompt", "template": "A"}, {"name": "prompt", "template": "A", "denoise": True},
                            {"name": "prompt", "label": "mine"}]) == ["prompt", "prompt(denoise=true)", "mine"]
    with pytest.raises(ConfigError, match="scorers 1 and 2 would both be labelled 'mean'"):
        distinct_labels(["mean", "mean"])


def test_evaluate_keeps_similarities_and_reports_paired_differences(tmp_path, tiny_model_dir, tiny_data_dir):
    from sts_lightning.runs.compare_runs import compare
    from sts_lightning.runs.evaluate_run import evaluate
    from sts_lightning.sts.predictions import read_predictions

    tasks = ["sts12", "stsb-dev"]
    results = evaluate(compose_evaluate_config(tmp_path, [
        f"encoders=[{tiny_model_dir}]", "scorers=[mean,{name:mean,batch_size:2},cls]", f"paths.data_dir={tiny_data_dir}",
        f"tasks=[{','.join(tasks)}]", "bootstrap.samples=200", "embedding_cache=false"]))
    assert [r["scorer"] for r in results] == ["mean", "mean(batch_size=2)", "cls"]
    out = tmp_path / "out"
    for i, r in enumerate(results):  # each row's similarities give back its Spearman
        saved = read_predictions(out / "predictions.npz", f"row{i}")
        for t in tasks:
            rho = 100 * spearmanr(saved.sims[t], saved.pairs[t].gold).statistic
            assert rho == pytest.approx(r["tasks"][t]["all"]["spearman"], abs=1e-6)
    table = (out / "results.md").read_text()
    paired = table.split("Paired differences to the first row:")[1].strip().splitlines()
    assert paired[0] == f"| minus {tiny_model_dir} / mean | sts12 | stsb-dev | avg |"
    assert paired[2].split("|")[2].strip() == "+0.00 [+0.00, +0.00]~"  # the same vectors, other batches: no difference
    paths = compare([str(out), str(out)], tmp_path / "cmp", samples=200)
    text = paths["markdown"].read_text()
    assert f"{tiny_model_dir.name} / mean(batch_size=2) (out)" in text
    assert "Paired differences to the first row:" in text
    assert json.loads((out / "results.json").read_text())["results"][1]["scorer"] == "mean(batch_size=2)"
    assert np.isfinite(float(text.split("\n")[2].split("|")[3].strip().rstrip("~")))
