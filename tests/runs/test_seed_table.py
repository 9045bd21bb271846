"""The seeds table: tasks every seed scored, sample std, the average's std over the seeds' averages."""

from __future__ import annotations

import statistics

import pytest

from sts_lightning.runs.seed_table import seed_table, summarise_seeds, task_scores


def test_task_scores_leave_out_the_callbacks_own_average_and_other_metrics():
    metrics = {"val/sts12_spearman": 50.0, "val/sts_avg_spearman": 60.0, "train/loss": 1.0, "val/x_pearson": 3.0}
    assert task_scores(metrics) == {"sts12": 50.0}


def test_mean_and_sample_std_per_task_and_of_the_seeds_averages():
    summary = summarise_seeds({0: {"val/a_spearman": 50.0, "val/b_spearman": 70.0, "val/c_spearman": 1.0},
                               1: {"val/a_spearman": 54.0, "val/b_spearman": 60.0},
                               2: {"val/a_spearman": 52.0, "val/b_spearman": 65.0}})
    assert summary["tasks"] == ["a", "b"]  # c: only one seed scored it
    assert summary["mean"]["a"] == 52.0 and summary["std"]["a"] == pytest.approx(2.0)
    averages = [60.0, 57.0, 58.5]
    assert summary["mean"]["avg"] == pytest.approx(statistics.fmean(averages))
    assert summary["std"]["avg"] == pytest.approx(statistics.stdev(averages))  # not the mean of the tasks' stds
    lines = seed_table(summary).splitlines()
    assert lines[0] == "| seed | a | b | avg |"
    assert lines[2] == "| 0 | 50.00 | 70.00 | 60.00 |"
    assert lines[5] == "| mean ± std (3 seeds) | 52.00 ± 2.00 | 65.00 ± 5.00 | 58.50 ± 1.50 |"


def test_one_seed_has_std_zero():
    summary = summarise_seeds({3: {"val/a_spearman": 50.0}})
    assert summary["std"] == {"a": 0.0, "avg": 0.0} and summary["seeds"] == [3]
