"""evaluate(cfg) end to end on the tiny model and tiny data: outputs written, errors clear."""

from __future__ import annotations

import json

import pytest

from sts_lightning.embeddings.errors import ConfigError, DataError
from tests.helpers import compose_evaluate_config


def test_evaluate_many_scorers_one_command(tmp_path, tiny_model_dir, tiny_data_dir):
    from sts_lightning.runs.evaluate_run import evaluate

    cfg = compose_evaluate_config(tmp_path, [f"encoders=[{tiny_model_dir}]", "scorers=[cls,mean,max,first_last_avg,last2_avg]",
                          f"paths.data_dir={tiny_data_dir}", "tasks=[sts12,sts16,stsb-dev,sick-trial]"])
    results = evaluate(cfg)
    assert [r["scorer"] for r in results] == ["cls", "mean", "max", "first_last_avg", "last2_avg"]
    out = tmp_path / "out"
    payload = json.loads((out / "results.json").read_text())
    assert payload["results"][1]["tasks"]["sts16"]["all"]["n"] == 5
    sts12 = payload["results"][1]["tasks"]["sts12"]  # bootstrap intervals (evaluate.yaml bootstrap.samples: 1000)
    for scores in (sts12["all"], *sts12["subsets"].values()):
        lo, hi = scores["spearman_ci"]
        assert lo <= scores["spearman"] <= hi
    table = (out / "results.md").read_text()
    assert "| tiny_bert0 / mean |" in table.replace(str(tiny_model_dir.parent) + "/", "")
    assert (out / "results.png").stat().st_size > 1000


def test_bootstrap_samples_0_leaves_the_intervals_out(tmp_path, tiny_model_dir, tiny_data_dir):
    from sts_lightning.runs.evaluate_run import evaluate

    (row,) = evaluate(compose_evaluate_config(tmp_path, [f"encoders=[{tiny_model_dir}]", f"paths.data_dir={tiny_data_dir}",
                                                         "tasks=[stsb-dev]", "bootstrap.samples=0"]))
    assert "spearman_ci" not in row["tasks"]["stsb-dev"]["all"]
    assert "[lo, hi]" not in (tmp_path / "out" / "results.md").read_text()


def test_shared_pass_gives_same_numbers_as_separate_runs(tmp_path, tiny_model_dir, tiny_data_dir):
    from sts_lightning.runs.evaluate_run import evaluate

    base = [f"encoders=[{tiny_model_dir}]", f"paths.data_dir={tiny_data_dir}", "tasks=[stsb-dev]"]
    both = evaluate(compose_evaluate_config(tmp_path, [*base, "scorers=[mean,max]"]))
    alone = evaluate(compose_evaluate_config(tmp_path, [*base, "scorers=[max]"]))
    assert both[1]["tasks"]["stsb-dev"]["all"]["spearman"] == pytest.approx(
        alone[0]["tasks"]["stsb-dev"]["all"]["spearman"], abs=1e-9)


def test_dims_add_a_row_per_dimension_from_the_same_vectors(tmp_path, tiny_model_dir, tiny_data_dir):
    """``dims=[16,8]``: ``mean@16`` and ``mean@8`` after ``mean`` (the first d numbers, by cosine), no further pass;
    a scorer without one vector (Sen2Pro) gets n/a rows, not a failed run (a dimension above every encoder's width is
    refused before: tests/runs/test_new_option_errors.py)."""
    from sts_lightning.runs.evaluate_run import evaluate

    base = [f"encoders=[{tiny_model_dir}]", f"paths.data_dir={tiny_data_dir}", "tasks=[stsb-dev]", "bootstrap.samples=0",
            "embedding_cache=false"]
    rows = evaluate(compose_evaluate_config(tmp_path, [*base, "scorers=[mean,sen2pro]", "dims=[16,8]"]))
    assert [r["scorer"] for r in rows] == ["mean", "mean@16", "mean@8", "sen2pro", "sen2pro@16", "sen2pro@8"]
    assert "cannot be truncated" in rows[4]["unsupported"]
    assert rows[1]["sentences_encoded"] == rows[2]["sentences_encoded"] == 0
    import sts_lightning as sl  # load(dim=8) scores as the mean@8 row

    api = sl.load(str(tiny_model_dir), dim=8).evaluate(["stsb-dev"], data_dir=tiny_data_dir)
    assert api["stsb-dev"]["all"]["spearman"] == pytest.approx(rows[2]["tasks"]["stsb-dev"]["all"]["spearman"], abs=1e-6)


def _forward_passes(tmp_path) -> dict:
    return next(iter(json.loads((tmp_path / "out" / "results.json").read_text())["meta"]["forward_passes"].values()))


def test_a_second_evaluate_runs_no_forward_pass(tmp_path, tiny_model_dir, tiny_data_dir, caplog):
    """Issue 38: one encode for all scorers of the encoder, and none at all when the embedding cache is warm."""
    from sts_lightning.runs.evaluate_run import evaluate
    from sts_lightning.sts.scoring import pair_sentences
    from sts_lightning.sts.tasks import load_tasks

    overrides = [f"encoders=[{tiny_model_dir}]", "scorers=[cls,mean,first_last_avg,sbert_wk]",
                 f"paths.data_dir={tiny_data_dir}", "tasks=[stsb-dev,sts12]", "encoder.max_length=32"]
    unique = set(pair_sentences(load_tasks(["stsb-dev", "sts12"], tiny_data_dir)))
    first = evaluate(compose_evaluate_config(tmp_path, overrides))
    assert _forward_passes(tmp_path)["sentences_encoded"] == len(unique)  # one pass for four scorers
    with caplog.at_level("INFO"):
        second = evaluate(compose_evaluate_config(tmp_path, overrides))
    facts = _forward_passes(tmp_path)
    assert facts["sentences_encoded"] == 0 and facts["rows_from_cache"] == 4 * len(unique)  # four readings
    assert str(tmp_path / "embedding_cache") in facts["embedding_cache"]
    assert any("0 sentences encoded (forward passes)" in r.getMessage() for r in caplog.records)
    assert [r["tasks"] for r in second] == [r["tasks"] for r in first]  # the bits the first run wrote
    assert all(r["sentences_encoded"] == 0 for r in second)


def test_the_embedding_cache_switch(tmp_path, tiny_model_dir, tiny_data_dir):
    from sts_lightning.runs.evaluate_run import evaluate

    overrides = [f"encoders=[{tiny_model_dir}]", f"paths.data_dir={tiny_data_dir}", "tasks=[stsb-dev]",
                 "embedding_cache=false"]
    for _ in range(2):
        evaluate(compose_evaluate_config(tmp_path, overrides))
        assert _forward_passes(tmp_path)["sentences_encoded"] > 0 and _forward_passes(tmp_path)["embedding_cache"] is None
    assert not (tmp_path / "embedding_cache").exists()
    with pytest.raises(ConfigError, match="embedding_cache='flase': use true or false"):
        evaluate(compose_evaluate_config(tmp_path, [*overrides[:-1], "embedding_cache=flase"]))


@pytest.mark.parametrize(
    ("override", "error", "message"),
    [
        ("scorers=[meen]", ConfigError, "unknown scorer 'meen'"),
        ("scorers=[{name: mean, windw: 3}]", ConfigError, r"unknown option\(s\) \['windw'\]"),
        ("tasks=[sts99]", ConfigError, "unknown STS task 'sts99'"),
        ("dims=[16,0]", ConfigError, r"dims=\[16, 0\] must be a list of integers > 0"),
        ("dims=[16,16]", ConfigError, "repeats a dimension"),
    ],
)
def test_bad_config_values_are_clear(tmp_path, tiny_model_dir, tiny_data_dir, override, error, message):
    from sts_lightning.runs.evaluate_run import evaluate

    cfg = compose_evaluate_config(tmp_path, [f"encoders=[{tiny_model_dir}]", f"paths.data_dir={tiny_data_dir}",
                          "tasks=[stsb-dev]", override])
    with pytest.raises(error, match=message):
        evaluate(cfg)


def test_unknown_model_name_is_clear(tmp_path, tiny_data_dir):
    from sts_lightning.runs.evaluate_run import evaluate

    cfg = compose_evaluate_config(tmp_path, ["encoders=[no-such-model-xyz]", f"paths.data_dir={tiny_data_dir}", "tasks=[stsb-dev]"])
    with pytest.raises(ConfigError, match="no-such-model-xyz"):
        evaluate(cfg)


def test_missing_data_dir_is_clear(tmp_path, tiny_model_dir, monkeypatch):
    from sts_lightning.runs.evaluate_run import evaluate

    monkeypatch.delenv("STS_DATA_DIR", raising=False)
    monkeypatch.setattr("sts_lightning.embeddings.io.data_dir.CHECKOUT_DATA_DIR", tmp_path / "no-shared-data")
    cfg = compose_evaluate_config(tmp_path, [f"encoders=[{tiny_model_dir}]", "paths.data_dir=null"])
    with pytest.raises(DataError, match="no STS data directory configured"):
        evaluate(cfg)


def test_unknown_config_key_is_rejected(tmp_path):
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="windw"):
        compose_evaluate_config(tmp_path, ["scorer_options.sbert_wk.windw=3"])


def test_wandb_offline_logging_works_without_network(tmp_path, tiny_model_dir, tiny_data_dir, monkeypatch):
    from sts_lightning.runs.evaluate_run import evaluate

    monkeypatch.setenv("WANDB_MODE", "offline")  # conftest disables W&B; this test exercises offline mode
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = compose_evaluate_config(tmp_path, [f"encoders=[{tiny_model_dir}]", f"paths.data_dir={tiny_data_dir}", "tasks=[stsb-dev]",
                          "wandb.enabled=true", "wandb.mode=offline"])
    evaluate(cfg)
    runs = list((tmp_path / "out" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].rglob("*.wandb"))


def test_sen2pro_samples_follow_the_runs_seed(tmp_path):
    # a table's seeds must draw other MC-dropout / augmentation samples, not repeat one computation
    from omegaconf import OmegaConf

    options = [OmegaConf.to_container(compose_evaluate_config(tmp_path, [f"seed={s}"]).scorer_options, resolve=True)["sen2pro"]["seed"]
               for s in (0, 3)]
    assert options == [0, 3]
