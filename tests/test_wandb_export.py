"""W&B with no network: a tiny training with ``logger=wandb_offline`` leaves, for ``wandb sync``, the resolved
config, the final STS table and the export directory as a ``model`` artifact.

Asserted on what wandb 0.31 really writes offline: the run's ``.wandb`` record log (config and artifact
manifest, read by ``tests/wandb_records.py``), the table JSON under ``files/media`` and the artifact
files staged under ``$WANDB_DATA_DIR``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from lightning_modules.wandb_export import TABLE_COLUMNS, log_final, sts_rows
from tests.test_train import HAS_STS_CALLBACK, _cfg, train_data_dir  # noqa: F401  (module-scoped fixture)
from tests.wandb_records import offline_run_file, read_finished_run


def _wandb_env(mp: pytest.MonkeyPatch, root: Path, mode: str) -> Path:
    """Every W&B directory in ``root`` (runs, staged artifact files, cache, settings); returns the data dir."""
    for name, sub in (("WANDB_DIR", "runs"), ("WANDB_DATA_DIR", "data"), ("WANDB_CACHE_DIR", "cache"),
                      ("WANDB_CONFIG_DIR", "config")):
        mp.setenv(name, str(root / sub))
    mp.setenv("WANDB_MODE", mode)
    mp.setenv("WANDB_SILENT", "true")
    return root / "data"


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory, tiny_model_dir, train_data_dir):  # noqa: F811
    """One epoch cut to 2 batches (the STS validation runs at its end), exported, logged offline."""
    import wandb

    from lightning_modules.train_run import train

    out = tmp_path_factory.mktemp("wandb_run")
    with pytest.MonkeyPatch.context() as mp:
        data_dir = _wandb_env(mp, out, "offline")
        cfg = _cfg(out, tiny_model_dir, train_data_dir, ["logger=wandb_offline", "+trainer.limit_train_batches=2",
                                                         "~callbacks.model_checkpoint", "~callbacks.last_checkpoint"])
        try:
            metrics = train(cfg)
        finally:
            wandb.finish()  # Lightning leaves the run open after fit
            wandb.teardown()  # else the next wandb.init in this process keeps this one's mode (offline)
    records = read_finished_run(offline_run_file(out))
    return SimpleNamespace(out=out, metrics=metrics, records=records, data_dir=data_dir,
                           run_dir=offline_run_file(out).parent)


def _of(records, kind: str) -> list:
    return [getattr(r, kind) for r in records if r.WhichOneof("record_type") == kind]


def test_resolved_config_is_in_the_run(offline_run):
    config = {item.key: json.loads(item.value_json) for rec in _of(offline_run.records, "config") for item in rec.update}
    assert config["seed"] == 42
    assert config["output_dir"] == str(offline_run.out)  # resolved, not "${...}"
    assert config["data"]["batch_size"] == 4 and config["trainer"]["_target_"] == "lightning.pytorch.Trainer"
    assert config["lr"] == 2e-5  # Lightning's own model hparams are still there


def test_export_is_a_model_artifact_with_its_files_staged(offline_run):
    artifacts = [a for a in _of(offline_run.records, "artifact") if a.type == "model"]
    assert len(artifacts) == 1
    artifact = artifacts[0]
    run_id = offline_run.run_dir.name.rsplit("-", 1)[-1]
    assert artifact.name == f"model-{run_id}"
    entries = {e.path: Path(e.local_path) for e in artifact.manifest.contents}
    exported = {str(p.relative_to(offline_run.out / "export")) for p in (offline_run.out / "export").rglob("*")
                if p.is_file()}
    assert "model.safetensors" in entries and set(entries) == exported
    for path in entries.values():  # what `wandb sync` will upload, copied out of the export dir
        assert path.is_file() and offline_run.data_dir in path.parents
    metadata = json.loads(artifact.metadata)
    assert metadata["train/loss"] == pytest.approx(offline_run.metrics["train/loss"])
    if HAS_STS_CALLBACK:
        assert metadata["val/stsb-dev_spearman"] == pytest.approx(offline_run.metrics["val/stsb-dev_spearman"])


@pytest.mark.skipif(not HAS_STS_CALLBACK, reason="no STS callback, no STS metrics")
def test_sts_table_is_logged(offline_run):
    tables = list((offline_run.run_dir / "files" / "media" / "table").rglob("sts_final_*.table.json"))
    assert len(tables) == 1
    table = json.loads(tables[0].read_text())
    assert table["columns"] == TABLE_COLUMNS
    assert [row[0] for row in table["data"]] == ["stsb-dev"]
    assert table["data"][0][1] == pytest.approx(offline_run.metrics["val/stsb-dev_spearman"])


def test_sts_rows_pairs_spearman_with_pearson_and_skips_aggregates():
    metrics = {"val/sts_avg_spearman": 0.5, "val/b_spearman": float("nan"), "val/b_pearson": 0.1,
               "val/a_spearman": 0.7, "val/a_pearson": 0.6, "train/loss": 1.0}
    assert sts_rows(metrics) == [["a", 0.7, 0.6], ["b", None, 0.1]]


def test_disabled_wandb_logs_and_stages_nothing(tmp_path, monkeypatch):
    """WANDB_MODE=disabled (the test default): no artifact copy of a possibly large export."""
    import wandb
    from lightning.pytorch.loggers import WandbLogger

    data_dir = _wandb_env(monkeypatch, tmp_path, "disabled")
    export = tmp_path / "export"
    export.mkdir()
    (export / "config.json").write_text("{}")
    logger = WandbLogger(project="p", save_dir=str(tmp_path))
    trainer = SimpleNamespace(loggers=[logger], callback_metrics={"val/a_spearman": 0.5, "val/a_pearson": 0.4},
                              global_step=1)
    try:
        log_final(trainer, export)
    finally:
        wandb.finish()
    assert not [p for p in data_dir.rglob("*") if p.is_file()]
