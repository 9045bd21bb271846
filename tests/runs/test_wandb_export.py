"""W&B with no network: a tiny training with ``logger=wandb_offline`` leaves, for ``wandb sync``, the resolved
config, the group and tags, the final STS table and the export directory as a ``model`` artifact, all
inside the run directory.

Asserted on what wandb 0.31 really writes offline: the run's ``.wandb`` record log (config, run record,
artifact manifest, read by ``tests/runs/wandb_records.py``), the table JSON under ``files/media`` and the
artifact files staged under the W&B run directory. HOME and the XDG directories point at an empty
folder with no ``WANDB_*_DIR`` set, so wandb's own defaults (``~/.local/share/wandb``,
``~/.cache/wandb``, ``~/.config/wandb``) would show up there.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from sts_lightning.runs.wandb_export import TABLE_COLUMNS, log_final, staging_inside, sts_rows
from tests.helpers import compose_train_config
from tests.runs.wandb_records import offline_run_file, read_finished_run

WANDB_DIR_VARS = ("WANDB_DIR", "WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR")


def _wandb_env(mp: pytest.MonkeyPatch, home: Path, mode: str) -> Path:
    """wandb's defaults only, under a fresh ``home`` (HOME and XDG): what a user's machine would see."""
    for name in WANDB_DIR_VARS:
        mp.delenv(name, raising=False)
    mp.setenv("HOME", str(home))
    for name, sub in (("XDG_DATA_HOME", ".local/share"), ("XDG_CACHE_HOME", ".cache"), ("XDG_CONFIG_HOME", ".config")):
        mp.setenv(name, str(home / sub))
    mp.setenv("WANDB_MODE", mode)
    mp.setenv("WANDB_SILENT", "true")
    return home


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory, tiny_model_dir, train_data_dir):  # noqa: F811
    """One epoch cut to 2 batches (the STS validation runs at its end), exported, logged offline."""
    import wandb

    from sts_lightning.runs.train_run import train

    root = tmp_path_factory.mktemp("wandb")
    out, home = root / "run", root / "home"
    with pytest.MonkeyPatch.context() as mp:
        _wandb_env(mp, home, "offline")
        cfg = compose_train_config(out, tiny_model_dir, train_data_dir, ["logger=wandb_offline", "+trainer.limit_train_batches=2",
                                                         "~callbacks.model_checkpoint", "~callbacks.last_checkpoint"])
        try:
            metrics = train(cfg)
            left_open = wandb.run is not None  # train() must finish its run itself (see test below)
        finally:
            wandb.finish()  # only for a failed train(): a finished run is not finished twice
            wandb.teardown()  # else the next wandb.init in this process keeps this one's mode (offline)
        records = read_finished_run(offline_run_file(out))
    return SimpleNamespace(out=out, home=home, metrics=metrics, records=records, tiny_model_dir=tiny_model_dir,
                           run_dir=offline_run_file(out).parent, left_open=left_open)


def _of(records, kind: str) -> list:
    return [getattr(r, kind) for r in records if r.WhichOneof("record_type") == kind]


def test_resolved_config_is_in_the_run(offline_run):
    config = {item.key: json.loads(item.value_json) for rec in _of(offline_run.records, "config") for item in rec.update}
    assert config["seed"] == 42
    assert config["output_dir"] == str(offline_run.out)  # resolved, not "${...}"
    assert config["data"]["batch_size"] == 4 and config["trainer"]["_target_"] == "lightning.pytorch.Trainer"
    assert config["lr"] == 2e-5  # Lightning's own model hparams are still there


def test_run_is_grouped_by_method_and_tagged_with_method_and_backbone(offline_run):
    """Outside a Hydra job (no ``experiment=``) the group is the method; see the next test for experiments."""
    (run,) = _of(offline_run.records, "run")
    assert run.run_group == "sbert_nli"
    assert list(run.tags) == ["sbert_nli", offline_run.tiny_model_dir.name]


def _service_log(path: Path, home: Path) -> bool:
    """wandb-core's own process logs (``~/.cache/wandb/logs/core-debug-*.log``): one per process, not run
    data, never read by ``wandb sync``; only ``WANDB_CACHE_DIR`` set before the first run moves them."""
    rel = path.relative_to(home)
    return rel.parent == Path(".cache/wandb/logs") and rel.name.endswith(".log") and "-debug-" in rel.name


def test_nothing_lands_outside_the_run_directory(offline_run):
    home = offline_run.home
    assert not [p for p in _files(home) if not _service_log(p, home)]  # no staged table or model copies
    outside = [p for p in _files(offline_run.out.parent) if offline_run.out not in p.parents and home not in p.parents]
    assert not outside


def test_export_is_a_model_artifact_with_its_files_staged_in_the_run(offline_run):
    artifacts = [a for a in _of(offline_run.records, "artifact") if a.type == "model"]
    assert len(artifacts) == 1
    artifact = artifacts[0]
    run_id = offline_run.run_dir.name.rsplit("-", 1)[-1]
    assert artifact.name == f"model-{run_id}"
    entries = {e.path: Path(e.local_path) for e in artifact.manifest.contents}
    exported = {str(p.relative_to(offline_run.out / "export")) for p in (offline_run.out / "export").rglob("*")
                if p.is_file()}
    assert "model.safetensors" in entries and "1_Pooling/config.json" in entries and set(entries) == exported
    staging = offline_run.run_dir.resolve() / "artifacts" / "staging" / artifact.name
    for name, path in entries.items():  # what `wandb sync <run dir>` will upload: the export's own names, in that dir
        assert path == staging / name and path.is_file()
        exported_file = offline_run.out / "export" / name
        assert path.read_bytes() == exported_file.read_bytes()
        assert path.stat().st_ino == exported_file.stat().st_ino  # a hard link: no second copy of the model
    metadata = json.loads(artifact.metadata)
    assert metadata["train/loss"] == pytest.approx(offline_run.metrics["train/loss"])
    assert metadata["val/stsb-dev_spearman"] == pytest.approx(offline_run.metrics["val/stsb-dev_spearman"])


def test_no_temp_named_copy_but_wandbs_own_table_json(offline_run):
    """The user saw 68 MB of ``tmpXXXX`` files: now only wandb's copies of the logged table's JSON (its internal
    ``run_table`` artifact, which wandb adds twice and we do not stage) have such names, and they are small."""
    staging = offline_run.run_dir.resolve() / "artifacts" / "staging"
    temp_named = [p for p in staging.iterdir() if p.is_file()]
    tables = {Path(e.local_path).read_bytes() for a in _of(offline_run.records, "artifact") if a.type == "run_table"
              for e in a.manifest.contents}
    assert {p.read_bytes() for p in temp_named} <= tables and sum(p.stat().st_size for p in temp_named) < 4096


def test_train_finishes_its_run_and_leaves_no_traceback_in_the_wandb_log(offline_run):
    """An open run torn down at exit left ``HandleAbandonedError`` in ``logs/debug.log`` and no exit record."""
    assert not offline_run.left_open
    assert [r.exit.exit_code for r in offline_run.records if r.WhichOneof("record_type") == "exit"] == [0]
    debug_log = (offline_run.run_dir / "logs" / "debug.log").read_text()
    assert "finishing run" in debug_log
    assert "Traceback" not in debug_log and "Error" not in debug_log


def test_metrics_csv_is_written_beside_the_wandb_run(offline_run):
    """``logger=wandb_offline`` also keeps the CSV logger's metrics, which ``runs.compare_runs`` reads first."""
    header = (offline_run.out / "csv" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "train/loss" in header
    assert "val/stsb-dev_spearman" in header


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


def test_staging_inside_restores_the_users_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_DATA_DIR", "/users/own")
    with staging_inside(SimpleNamespace(sync_dir=str(tmp_path))) as staging:
        assert staging == tmp_path.resolve() / "artifacts" / "staging"
    assert os.environ["WANDB_DATA_DIR"] == "/users/own"
    monkeypatch.delenv("WANDB_DATA_DIR")
    with pytest.raises(RuntimeError), staging_inside(SimpleNamespace(sync_dir=str(tmp_path))):
        raise RuntimeError
    assert "WANDB_DATA_DIR" not in os.environ


def test_disabled_wandb_logs_and_stages_nothing(tmp_path, monkeypatch):
    """WANDB_MODE=disabled (the test default): no artifact copy of a possibly large export."""
    import wandb
    from lightning.pytorch.loggers import WandbLogger

    home = _wandb_env(monkeypatch, tmp_path / "home", "disabled")
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
        wandb.teardown()  # else a later offline run in this pytest process inherits "disabled" (and writes nothing)
    assert not _files(home) and not [p for p in _files(tmp_path) if "staging" in str(p)]


def _compose(overrides: list[str], hydra_config: bool = False):
    from hydra import compose, initialize_config_dir

    from tests.paths import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=overrides, return_hydra_config=hydra_config)


def test_group_is_the_experiment_inside_a_hydra_job():
    """What ``python train.py experiment=... logger=wandb`` resolves: Hydra's choice of the experiment."""
    from hydra.core.hydra_config import HydraConfig

    cfg = _compose(["experiment=ct/minilm_l3", "logger=wandb_offline"], hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    try:
        assert cfg.logger.wandb.group == "ct/minilm_l3"
        assert list(cfg.logger.wandb.tags) == ["ct", "paraphrase-MiniLM-L3-v2"]
    finally:
        HydraConfig.instance().cfg = None


@pytest.mark.parametrize(("overrides", "group", "tags"), [
    (["model=flow"], "flow", ["flow", "all-MiniLM-L6-v2"]),
    (["model=sbert_nli", "model.model_name_or_path=/runs/ct/seed0/export"], "sbert_nli", ["sbert_nli", "seed0/export"]),
    (["model=cross_view_ae", "data.sources=[all-mpnet-base-v2,org/paraphrase-MiniLM-L3-v2]"], "cross_view_ae",
     ["cross_view_ae", "all-mpnet-base-v2", "paraphrase-MiniLM-L3-v2"]),
    (["logger.wandb.group=mine", "logger.wandb.tags=[a,b]"], "mine", ["a", "b"]),  # the user's word wins
])
def test_group_and_tags_from_the_config(overrides, group, tags):
    cfg = _compose(["logger=wandb", *overrides])
    assert cfg.logger.wandb.group == group and list(cfg.logger.wandb.tags) == tags


def test_compare_runs_reads_the_offline_runs_sts_table(offline_run, tmp_path):
    """A run with only ``logger=wandb_offline`` (no metrics.csv, no before/after table) still compares offline."""
    from sts_lightning.runs.run_results import read_run

    shutil.copytree(offline_run.out / "wandb", tmp_path / "run" / "wandb")  # without csv/ (an older run)
    (run,) = read_run(tmp_path / "run")
    assert run.rows == [("after", {"stsb-dev": pytest.approx(offline_run.metrics["val/stsb-dev_spearman"])})]
