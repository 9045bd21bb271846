"""``python -m sts_lightning.runs.compare_runs`` on real run directories: one tiny ``train.py`` run (a real Hydra run dir
with ``.hydra/``, ``csv/metrics.csv``, ``sts_before_after.md``) and one tiny ``evaluate`` run (``results.json``).
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sts_lightning.embeddings.errors import DataError
from sts_lightning.runs.compare_runs import LEGEND, SAME, chart_rows, flatten, markdown_table, row_intervals
from sts_lightning.runs.run_results import RunRows, read_run
from tests.paths import CONFIG_DIR

ROOT = CONFIG_DIR.parent
TASKS = ["sts12", "stsb-dev", "sick-trial"]


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "WANDB_MODE": "disabled", **env})


@pytest.fixture(scope="module")
def train_dir(tmp_path_factory, tiny_model_dir, train_data_dir) -> Path:  # noqa: F811
    """``train.py experiment=quickstart`` on the tiny model, 3 one-step epochs at a high learning rate so the
    STS after training differs from before (and from the middle validations)."""
    run_dir = tmp_path_factory.mktemp("train") / "2026-01-01_00-00-00"
    done = _run(["train.py", "experiment=quickstart", f"hydra.run.dir={run_dir}", f"paths.data_dir={train_data_dir}",
                 f"model.model_name_or_path={tiny_model_dir}", "model.max_length=32", "model.eval_batch_size=8",
                 "data.batch_size=4", "data.sources=[snli:test]", "++trainer.limit_train_batches=2",
                 "trainer.max_epochs=3", "model.lr=0.05", "model.warmup_ratio=0", "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false",
                 f"callbacks.sts_evaluation.tasks=[{','.join(TASKS)}]", "callbacks.sts_evaluation.eval_at_start=true",
                 "callbacks.sts_evaluation.batch_size=8"])
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir


@pytest.fixture(scope="module")
def eval_dir(tmp_path_factory, tiny_model_dir, tiny_data_dir) -> Path:
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from sts_lightning.runs.evaluate_run import evaluate

    out = tmp_path_factory.mktemp("evaluate") / "e1"
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=[f"encoders=[{tiny_model_dir}]", "scorers=[mean,cls]",
                                                         f"paths.data_dir={tiny_data_dir}", f"tasks=[{','.join(TASKS)}]"])
    with open_dict(cfg):
        cfg.output_dir = str(out)
    evaluate(cfg)
    return out


def _csv_spearman(path: Path) -> list[dict[str, float]]:
    """The metrics.csv rows with STS values, read independently of runs.run_results."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return [{t: float(r[f"val/{t}_spearman"]) for t in TASKS} for r in rows if r.get(f"val/{TASKS[0]}_spearman")]


def _table_rows(table: str) -> dict[tuple[str, str], list[str]]:
    """The table's cells by (run, stage), without the ``~`` marks (the legend line after the table is skipped)."""
    lines = [line.strip().strip("|").split("|") for line in table.splitlines()[2:] if line.startswith("|")]
    return {(cells[0].strip(), cells[1].strip()): [c.strip().rstrip(SAME) for c in cells[2:]] for cells in lines}


def test_one_command_compares_training_and_evaluate_runs(train_dir, eval_dir, tiny_model_dir, tmp_path):
    out = tmp_path / "cmp"
    done = _run(["-m", "sts_lightning.runs.compare_runs", str(train_dir), str(eval_dir), "--out", str(out)])
    assert done.returncode == 0, done.stderr
    table = (out / "comparison.md").read_text()
    assert done.stdout.startswith(table)
    head = [c.strip() for c in table.splitlines()[0].strip("|").split("|")]
    tasks = head[2:-1]
    assert head[:2] == ["run", "stage"] and head[-1] == "avg" and sorted(tasks) == sorted(TASKS)
    rows = _table_rows(table)
    label = f"quickstart/sbert_nli/{tiny_model_dir.name}/seed42"  # experiment / method / backbone / seed
    scored = _csv_spearman(train_dir / "csv" / "metrics.csv")
    assert len(scored) == 4 and scored[0] != scored[-1]  # start + 3 epochs: the test can tell them apart
    for stage, expected in (("before", scored[0]), ("after", scored[-1])):
        assert rows[(label, stage)] == [f"{expected[t]:.2f}" for t in tasks] + \
            [f"{sum(expected.values()) / len(TASKS):.2f}"]
    results = json.loads((eval_dir / "results.json").read_text())["results"]
    for r in results:
        cells = rows[(f"{tiny_model_dir.name} / {r['scorer']}", "eval")]
        assert cells[:-1] == [f"{r['tasks'][t]['all']['spearman']:.2f}" for t in tasks]
    assert len(rows) == 2 + len(results)
    assert (out / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "comparison.png").stat().st_size > 5000


def test_before_after_table_stands_in_for_a_missing_metrics_csv(train_dir, tmp_path):
    """A run without metrics.csv (``logger=wandb`` online, or ``wandb_offline`` before it kept the CSV logger too):
    the callback's table still holds both stages."""
    copy = tmp_path / "run"
    shutil.copytree(train_dir / ".hydra", copy / ".hydra")
    shutil.copy(train_dir / "sts_before_after.md", copy)
    (run,) = read_run(copy)
    scored = _csv_spearman(train_dir / "csv" / "metrics.csv")
    assert [stage for stage, _ in run.rows] == ["before", "after"]
    for (_, scores), expected in zip(run.rows, (scored[0], scored[-1]), strict=True):
        assert scores == pytest.approx(expected, abs=0.005)  # the table rounds to 2 decimals


def test_not_a_run_dir_and_no_results_are_one_line_errors(train_dir, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="is not a run directory: no results.json"):
        read_run(tmp_path / "empty")
    with pytest.raises(DataError, match="is not a directory"):
        read_run(tmp_path / "missing")
    shutil.copytree(train_dir / ".hydra", tmp_path / "no_sts" / ".hydra")  # e.g. sts_evaluation switched off
    with pytest.raises(DataError, match="has no STS results"):
        read_run(tmp_path / "no_sts")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text('{"results": [{"encoder": "x"}]}')
    with pytest.raises(DataError, match="is not an evaluate results file"):
        read_run(tmp_path / "bad")
    done = _run(["-m", "sts_lightning.runs.compare_runs", str(train_dir), str(tmp_path / "empty"), "--out", str(tmp_path / "o")])
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith(f"error: {tmp_path / 'empty'} is not a run directory")
    assert not (tmp_path / "o").exists()


def test_table_marks_missing_tasks_and_averages_only_common_ones():
    runs = [RunRows(Path("a/r1"), "ct/x", [("after", {"stsb-dev": 80.0, "sts12": 60.0})]),
            RunRows(Path("a/r2"), "ct/x", [("after", {"stsb-dev": 70.0, "sts12": math.nan})]),
            RunRows(Path("b/e"), "x / mean", [("eval", {"stsb-dev": 50.0, "sick-test": 40.0})])]
    rows = flatten(runs)
    assert [r[0] for r in rows] == ["ct/x (r1)", "ct/x (r2)", "x / mean"]  # equal labels told apart
    table = markdown_table(rows)
    assert table.splitlines()[0] == "| run | stage | sts12 | stsb-dev | sick-test | avg (stsb-dev) |"  # papers' order
    assert _table_rows(table) == {("ct/x (r1)", "after"): ["60.00", "80.00", "-", "80.00"],
                                  ("ct/x (r2)", "after"): ["n/a", "70.00", "-", "70.00"],
                                  ("x / mean", "eval"): ["-", "50.00", "40.00", "50.00"]}


def test_chart_gets_the_tables_average_and_none_of_one_task():
    runs = [RunRows(Path("a"), "a", [("eval", {"sts13": 80.0, "sts12": 60.0})]),
            RunRows(Path("b"), "b", [("eval", {"sts12": 70.0, "sts13": 90.0})])]
    assert chart_rows(flatten(runs)) == [("a", "eval", {"sts13": 80.0, "sts12": 60.0, "avg": 70.0}),
                                         ("b", "eval", {"sts12": 70.0, "sts13": 90.0, "avg": 80.0})]
    runs[1].rows[0][1].pop("sts13")
    assert [scores for _, _, scores in chart_rows(flatten(runs))] == [{"sts13": 80.0, "sts12": 60.0}, {"sts12": 70.0}]


def test_differences_inside_the_intervals_are_marked_and_explained():
    runs = [RunRows(Path("e"), "a / mean", [("eval", {"sts12": 80.0, "sts16": 70.0})],
                    {"eval": {"sts12": (78.0, 82.0), "sts16": (69.0, 71.0)}}),
            RunRows(Path("e"), "a / cls", [("eval", {"sts12": 79.0, "sts16": 60.0})],
                    {"eval": {"sts12": (77.5, 79.5), "sts16": (58.0, 62.0)}}),
            RunRows(Path("s"), "ct/seeds0,1", [("after (mean of 2 seeds)", {"sts12": 70.0, "sts16": 72.5})],
                    {"after (mean of 2 seeds)": {"sts12": (69.0, 71.0), "sts16": (70.0, 75.0), "avg": (70.0, 72.0)}})]
    lines = markdown_table(flatten(runs), row_intervals(runs)).splitlines()
    # sts12: cls's 79 is inside mean's (78, 82); sts16: mean's 70 is inside the seeds' (70, 75), cls is not;
    # avg: 75 (mean) is best, no interval of its own; the seeds' 71.25 with (70, 72) does not reach it.
    assert lines[2] == "| a / mean | eval | 80.00 | 70.00~ | 75.00 |"
    assert lines[3] == "| a / cls | eval | 79.00~ | 60.00 | 69.50 |"
    assert lines[4] == "| ct/seeds0,1 | after (mean of 2 seeds) | 70.00 | 72.50 | 71.25 |"
    assert lines[-1] == LEGEND
    plain = markdown_table(flatten(runs))  # no intervals: nothing marked, no legend
    assert SAME not in plain and LEGEND not in plain


def test_a_seed_group_is_one_row_of_means_with_mean_plus_minus_std(tmp_path):
    from sts_lightning.runs.seed_table import summarise_seeds

    summary = summarise_seeds({0: {"val/stsb-dev_spearman": 70.0, "val/sts12_spearman": 50.0},
                               1: {"val/stsb-dev_spearman": 74.0, "val/sts12_spearman": 52.0}})
    (tmp_path / "seeds_sts.json").write_text(json.dumps(summary))
    (run,) = read_run(tmp_path)
    stage = "after (mean of 2 seeds)"
    assert run.rows == [(stage, {"stsb-dev": 72.0, "sts12": 51.0})]
    lo, hi = run.intervals[stage]["stsb-dev"]
    assert (lo, hi) == pytest.approx((72.0 - 8**0.5, 72.0 + 8**0.5))
    assert run.intervals[stage]["avg"] == pytest.approx((61.5 - 1.5 * 2**0.5, 61.5 + 1.5 * 2**0.5))
