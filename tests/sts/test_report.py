"""evaluate's results.md / results.png: tasks in the papers' order, the chart fed the table's average."""

from __future__ import annotations

from sts_lightning.sts.report import chart_rows, markdown_table


def _result(scorer: str, scores: dict[str, float]) -> dict:
    return {"encoder": "enc", "scorer": scorer, "seconds": 1.0,
            "tasks": {t: {"all": {"spearman": v, "pearson": v}} for t, v in scores.items()}}


def test_table_columns_in_the_papers_order_not_the_configs():
    table = markdown_table([_result("mean", {"sts16": 80.0, "sts12": 70.0, "stsb-dev": 86.0})])
    assert table.splitlines()[0] == "| encoder / scorer | sts12 | sts16 | stsb-dev | avg | time (s) |"
    assert table.splitlines()[2] == "| enc / mean | 70.00 | 80.00 | 86.00 | 78.67 | 1.0 |"


def test_chart_rows_carry_the_average_only_of_two_tasks_or_more():
    (row,) = chart_rows([_result("cls", {"sts16": 80.0, "sts12": 70.0})])
    assert row == ("enc / cls", "eval", {"sts16": 80.0, "sts12": 70.0, "avg": 75.0})
    assert chart_rows([_result("cls", {"sts12": 70.0})]) == [("enc / cls", "eval", {"sts12": 70.0})]


def test_a_bootstrap_interval_stands_beside_its_score_and_the_legend_under_the_table():
    result = _result("mean", {"sts12": 70.0, "stsb-dev": 86.0})
    result["tasks"]["sts12"]["all"]["spearman_ci"] = [68.5, 71.25]
    lines = markdown_table([result]).splitlines()
    assert lines[2] == "| enc / mean | 70.00 [68.50, 71.25] | 86.00 | 78.00 | 1.0 |"
    assert lines[-1].startswith("[lo, hi]: bootstrap 95% confidence interval")
    assert "bootstrap" not in markdown_table([_result("mean", {"sts12": 70.0})])


def test_two_rows_of_one_name_are_two_dots():
    """``encoders=[a,a]`` (or an older results.json's two ``prompt`` rows): numbered, never merged into one dot."""
    rows = chart_rows([_result("prompt", {"sts12": 70.0}), _result("prompt", {"sts12": 72.0})])
    assert [(label, scores) for label, _, scores in rows] == [("enc / prompt #1", {"sts12": 70.0}),
                                                            ("enc / prompt #2", {"sts12": 72.0})]


def test_a_rows_speed_is_sentences_or_pairs_per_second():
    """A bi-encoder's cost is the sentences it encodes, a cross-encoder's the pairs it reads: each row says which."""
    vectors, pairs = _result("mean", {"sts12": 70.0}), _result("cross_encoder", {"sts12": 80.0})
    vectors["rate"] = {"unit": "sentences", "count": 2000, "per_s": 1234.4}
    pairs["rate"] = {"unit": "pairs", "count": 1000, "per_s": 98.6}
    lines = markdown_table([vectors, pairs]).splitlines()
    assert lines[0].endswith("| time (s) | speed |")
    assert lines[2].endswith("| 1.0 | 1,234 sentences/s |") and lines[3].endswith("| 1.0 | 99 pairs/s |")
