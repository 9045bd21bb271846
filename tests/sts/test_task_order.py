"""Tasks in the papers' order in every table and chart, whatever order a config or a file listed them in."""

from __future__ import annotations

import random

import pytest

from sts_lightning.sts.task_order import is_average, ordered_tasks
from sts_lightning.sts.tasks import LOCAL_TASKS, STANDARD_TASKS

PAPER_ORDER = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb-dev", "stsb-test", "sick-test"]


def test_the_papers_order_whatever_the_input_order():
    shuffled = PAPER_ORDER[:]
    random.Random(0).shuffle(shuffled)
    assert shuffled != PAPER_ORDER
    assert ordered_tasks(shuffled) == PAPER_ORDER


def test_file_order_of_the_users_report_is_fixed():
    """The user's finding: columns came as sts12, sts16, sts13."""
    assert ordered_tasks(["sts12", "sts16", "sts13"]) == ["sts12", "sts13", "sts16"]


def test_unknown_tasks_after_the_known_ones_alphabetically_and_averages_last():
    names = ["avg", "zeta", "sick-train+sick-trial", "Alpha", "sts14", "avg (sts12, sts14)", "stsb-train"]
    assert ordered_tasks(names) == ["sts14", "stsb-train", "sick-train+sick-trial", "Alpha", "zeta",
                                    "avg", "avg (sts12, sts14)"]


def test_dev_before_test_and_mteb_names_join_their_family():
    assert ordered_tasks(["SICK-R", "stsb-test", "STSBenchmark", "STS12", "stsb-dev"]) == \
        ["STS12", "stsb-dev", "stsb-test", "STSBenchmark", "SICK-R"]


def test_duplicates_are_dropped():
    assert ordered_tasks(["sts13", "sts12", "sts13"]) == ["sts12", "sts13"]


def test_the_standard_tasks_are_already_in_order_and_every_local_task_is_known():
    assert ordered_tasks(STANDARD_TASKS) == STANDARD_TASKS
    assert ordered_tasks([*LOCAL_TASKS, "aaa"])[-1] == "aaa"  # every local task sorts before an unknown one


@pytest.mark.parametrize(("name", "average"), [("avg", True), ("sts_avg", True), ("avg (sts12)", True),
                                                ("mean", True), ("sts12", False), ("average_pool", False)])
def test_is_average(name, average):
    assert is_average(name) is average
