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

import numpy as np
import pytest
from scipy.stats import spearmanr

from sts_lightning.embeddings.errors import DataError
from sts_lightning.runs.compare_runs import SAME, chart_rows, flatten, markdown_table, task_columns
from sts_lightning.runs.row_differences import row_differences
from sts_lightning.runs.run_results import RunRows, read_run
from sts_lightning.sts.paired import AVG, interval, paired_table
from sts_lightning.sts.predictions import TaskPairs, write_predictions
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
    main = table.split("\n\n")[0]  # the paired differences' table below is not part of it
    lines = [line.strip().strip("|").split("|") for line in main.splitlines()[2:] if line.startswith("|")]
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


def _saved(tmp_path: Path, name: str, sims: dict[str, np.ndarray], gold: dict[str, np.ndarray],
           fingerprint: str = "same") -> tuple[Path, str]:
    path = write_predictions(tmp_path / f"{name}.npz", {"pred": sims},
                             {t: TaskPairs(g, f"{fingerprint}:{t}") for t, g in gold.items()})
    return path, "pred"


def _three_systems(tmp_path: Path) -> list[RunRows]:
    """On two tasks: a; b, a with a little noise of its own (a small difference that every resample shows);
    c, clearly worse."""
    rng = np.random.default_rng(0)
    gold = {t: np.round(rng.uniform(0, 5, 400), 1) for t in ("sts12", "sts16")}
    a = {t: g + rng.normal(size=400) for t, g in gold.items()}
    sims = {"a": a, "b": {t: v + 0.25 * rng.normal(size=400) for t, v in a.items()},
            "c": {t: g + 3 * rng.normal(size=400) for t, g in gold.items()}}
    runs = []
    for name, s in sims.items():
        scores = {t: float(100 * spearmanr(s[t], gold[t]).statistic) for t in gold}
        cis = {t: tuple(interval(paired_table([s], gold, 1000).replicates[t][0])) for t in gold}
        runs.append(RunRows(tmp_path / name, f"m / {name}", [("eval", scores)], {"eval": cis},
                            predictions={"eval": _saved(tmp_path, name, s, gold)}))
    return runs


def test_marks_and_differences_come_from_the_paired_bootstrap(tmp_path):
    runs = _three_systems(tmp_path)
    rows = flatten(runs)
    tasks, common = task_columns(rows)
    diffs = row_differences(runs, tasks, common, samples=1000)
    text = markdown_table(rows, diffs)
    table, differences = text.split("\nPaired differences to the first row:\n\n")
    lines = table.splitlines()
    for i, task in enumerate([*tasks, AVG]):
        column = [float(line.split("|")[3 + i].strip().rstrip(SAME)) for line in lines[2:5]]
        best = int(np.argmax(column))
        for row in range(3):
            d = diffs.difference(task, row, best)
            assert lines[2 + row].split("|")[3 + i].strip().endswith(SAME) == (row != best and d.same)
    # a vs b: their separate bootstrap intervals overlap, yet the paired interval of b - a excludes 0
    (lo_a, hi_a), (lo_b, hi_b) = runs[0].intervals["eval"]["sts12"], runs[1].intervals["eval"]["sts12"]
    assert lo_a < hi_b and lo_b < hi_a
    b_minus_a = diffs.difference("sts12", 1, 0)
    assert b_minus_a.hi < 0 and not b_minus_a.same
    assert differences.splitlines()[:4] == [
        "| minus m / a (eval) | sts12 | sts16 | avg |", "|---|---|---|---|",
        "| m / b (eval) | " + " | ".join(diffs.difference(c, 1, 0).cell() for c in ("sts12", "sts16", AVG)) + " |",
        "| m / c (eval) | " + " | ".join(diffs.difference(c, 2, 0).cell() for c in ("sts12", "sts16", AVG)) + " |"]
    avg = diffs.difference(AVG, 2, 0)  # the average's resamples: the mean of the tasks' paired differences
    per_task = [diffs.table.replicates[t][2] - diffs.table.replicates[t][0] for t in tasks]
    assert (avg.lo, avg.hi) == pytest.approx(interval((per_task[0] + per_task[1]) / 2))


def test_other_pairs_are_refused_in_one_line(tmp_path):
    runs = _three_systems(tmp_path)
    gold = {"sts12": np.round(np.random.default_rng(5).uniform(0, 5, 400), 1)}
    runs.append(RunRows(tmp_path / "x", "other data", [("after", {"sts12": 50.0})],
                        predictions={"after": _saved(tmp_path, "x", {"sts12": gold["sts12"]}, gold, "other")}))
    with pytest.raises(DataError, match=r"were not scored on the same pairs of sts12"):
        row_differences(runs, ["sts12", "sts16"], ["sts12"])
    assert row_differences(runs, ["sts12", "sts16"], ["sts12"], samples=0).table is None  # --samples 0: no check


def test_seed_groups_are_compared_over_their_seeds(tmp_path):
    from sts_lightning.runs.seed_table import summarise_seeds

    for name, shift in (("s1", 0.0), ("s2", 0.2), ("s3", -6.0)):
        summary = summarise_seeds({k: {"val/stsb-dev_spearman": 70.0 + k + shift, "val/sts12_spearman": 50.0 - k}
                                   for k in range(3)})
        (tmp_path / name).mkdir()
        (tmp_path / name / "seeds_sts.json").write_text(json.dumps(summary))
    runs = [run for name in ("s1", "s2", "s3") for run in read_run(tmp_path / name)]
    rows = flatten(runs)
    tasks, common = task_columns(rows)
    diffs = row_differences(runs, tasks, common)
    d = diffs.difference("stsb-dev", 1, 0)  # the same seeds: every per-seed difference is 0.2
    assert d.diff == pytest.approx(0.2) and (d.lo, d.hi) == pytest.approx((0.2, 0.2))
    assert diffs.difference("sts12", 1, 0).same  # identical: the interval [0, 0] contains 0
    lines = markdown_table(rows, diffs).splitlines()
    # sts12 is the same for all three (the first is the best, the others ~); a constant 0.2 is resolved
    assert [line.split("|", 3)[3] for line in lines[2:5]] == [" 49.00 | 71.00 | 60.00 |", " 49.00~ | 71.20 | 60.10 |",
                                                              " 49.00~ | 65.00 | 57.00 |"]


def test_the_chart_draws_every_row_and_refuses_two_rows_with_one_name(tmp_path):
    import matplotlib.pyplot as plt
    from matplotlib.collections import PathCollection

    from sts_lightning.sts.score_chart import check_rows, draw

    runs = _three_systems(tmp_path)
    # one label twice, in directories of one name (an older results.json's two "prompt" rows): numbered, not merged
    runs.append(RunRows(tmp_path / "old" / "a", "m / a", [("eval", {"sts12": 1.0, "sts16": 2.0})]))
    rows = chart_rows(flatten(runs))
    assert [r[0] for r in rows] == ["m / a (a) #1", "m / b", "m / c", "m / a (a) #2"]
    fig = draw(rows)
    dots = sum(len(c.get_offsets()) for ax in fig.axes for c in ax.collections if isinstance(c, PathCollection))
    plt.close(fig)
    assert dots == sum(len(scores) for _, _, scores in rows) == 4 * 3  # 2 tasks + avg, every row
    with pytest.raises(DataError, match="two chart rows are both 'x' \\(eval\\)"):
        check_rows([("x", "eval", {"sts12": 1.0}), ("x", "eval", {"sts12": 2.0})])


def test_a_seed_group_is_drawn_as_training_with_its_std(tmp_path):
    import matplotlib.pyplot as plt
    from matplotlib.collections import PathCollection
    from matplotlib.colors import to_rgba

    from sts_lightning.runs.compare_runs import chart_spreads
    from sts_lightning.runs.seed_table import summarise_seeds
    from sts_lightning.sts.score_chart import STAGE_STYLE, draw, panel_points, style_of

    summary = summarise_seeds({0: {"val/stsb-dev_spearman": 70.0, "val/sts12_spearman": 50.0},
                               1: {"val/stsb-dev_spearman": 74.0, "val/sts12_spearman": 52.0}})
    (tmp_path / "seeds_sts.json").write_text(json.dumps(summary))
    runs = read_run(tmp_path) + [RunRows(tmp_path, "e / mean", [("eval", {"stsb-dev": 71.0, "sts12": 49.0})])]
    rows, spreads = chart_rows(flatten(runs)), chart_spreads(runs)
    assert style_of(rows[0][1]) == "after" and spreads[1] == {}
    points = panel_points("stsb-dev", rows, spreads)
    assert points[0].spread == pytest.approx((72.0 - 8**0.5, 72.0 + 8**0.5)) and points[1].spread is None
    assert panel_points("avg", rows, spreads)[0].spread == pytest.approx((61.5 - 1.5 * 2**0.5, 61.5 + 1.5 * 2**0.5))
    fig = draw(rows, spreads=spreads)
    bars = [c for ax in fig.axes for c in ax.containers]
    faces = {tuple(c.get_facecolors()[0]) for ax in fig.axes for c in ax.collections if isinstance(c, PathCollection)}
    plt.close(fig)
    assert len(bars) == 3  # stsb-dev, sts12, avg: one error bar each, the seed group's
    assert faces == {to_rgba(STAGE_STYLE[s]["facecolor"]) for s in ("after", "eval")}  # seeds: a training result


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
