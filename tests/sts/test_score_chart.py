"""The comparison chart's decisions, read back from the numbers and the matplotlib Axes they produce."""

from __future__ import annotations

import math

import pytest

from sts_lightning.sts.score_chart import (
    DPI,
    LABEL_CHARS,
    MAX_HEIGHT_IN,
    MAX_WIDTH_IN,
    MIN_SPAN,
    chart_layout,
    draw,
    panel_limits,
    save_chart,
    wrap_label,
)

TASKS_FILE_ORDER = ["sts16", "sts12", "sick-test", "sts13", "stsb-test", "sts15", "sts14"]
PAPER_ORDER = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb-test", "sick-test", "avg"]


def ten_runs() -> list[tuple[str, str, dict[str, float]]]:
    """10 runs x 7 tasks (+ avg) around 86 whose scores differ by exactly 1 point; the first trained (before/after)."""
    rows = []
    for i in range(10):
        scores = {t: 80.0 + k + i for k, t in enumerate(TASKS_FILE_ORDER)}
        scores["avg"] = sum(scores.values()) / len(scores)
        label = f"experiment_{i}/method/paraphrase-MiniLM-L3-v2/seed{i}"
        if i == 0:
            rows.append((label, "before", {t: v - 5 for t, v in scores.items()}))
        rows.append((label, "after" if i == 0 else "eval", scores))
    return rows


@pytest.fixture()
def figure():
    import matplotlib.pyplot as plt

    fig = draw(ten_runs())
    yield fig
    plt.close(fig)


def test_panels_in_the_papers_order_with_the_average_last():
    assert chart_layout(ten_runs()).groups == PAPER_ORDER


def test_axis_zooms_to_the_data_and_never_starts_at_zero():
    low, high = panel_limits([86.0, 87.0, 95.0])
    assert 80 < low < 86 and 95 < high < 100
    assert panel_limits([86.0, 86.1]) == pytest.approx((86.05 - MIN_SPAN * 0.68, 86.05 + MIN_SPAN * 0.68))
    assert panel_limits([math.nan]) == (0.0, 100.0)  # nothing to zoom to


def test_a_one_point_difference_is_a_visible_step_in_every_panel(figure):
    """Bars from 0 made 86 vs 87 a 1 % change of length; here 1 point is >= 5 % of a panel's width."""
    panels = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == PAPER_ORDER
    for ax in panels:
        low, high = ax.get_xlim()
        assert low > 0 and 1 / (high - low) >= 0.05
        xs = sorted(x for coll in ax.collections for x, _ in coll.get_offsets())
        assert min(xs) >= low and max(xs) <= high  # every dot inside its panel
        assert "not from 0" in ax.get_xlabel()


def test_every_value_is_written_beside_its_dot(figure):
    sts12 = next(ax for ax in figure.axes if ax.get_title() == "sts12")
    written = {t.get_text() for t in sts12.texts}
    assert {f"{81.0 + i:.2f}" for i in range(10)} <= written and "76.00" in written  # the "before" value too


def test_runs_are_rows_named_on_the_axis_first_on_top(figure):
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert len(labels) == 10
    assert labels[-1] == wrap_label(ten_runs()[0][0]) and labels[0] == wrap_label(ten_runs()[-1][0])


def test_ten_runs_by_seven_tasks_stay_a_readable_size(tmp_path):
    """The old chart grew with runs x tasks to 3816 px wide; now width is capped and height grows with runs."""
    width, height = chart_layout(ten_runs()).figsize
    assert width <= MAX_WIDTH_IN and height <= MAX_HEIGHT_IN
    many = [(f"run{i}", "eval", {f"task{k}": 80.0 + i for k in range(20)}) for i in range(60)]
    assert chart_layout(many).figsize[0] <= MAX_WIDTH_IN and chart_layout(many).figsize[1] <= MAX_HEIGHT_IN
    save_chart(ten_runs(), tmp_path / "c.png")
    from PIL import Image

    with Image.open(tmp_path / "c.png") as png:
        assert png.size[0] <= MAX_WIDTH_IN * DPI and png.size[1] <= MAX_HEIGHT_IN * DPI


def test_a_legend_only_where_markers_differ():
    import matplotlib.pyplot as plt

    mixed, evals_only = draw(ten_runs()), draw([r for r in ten_runs() if r[1] == "eval"])
    try:
        assert [t.get_text() for t in mixed.legends[0].get_texts()] == \
            ["before training", "after training", "evaluated (evaluate.py)"]
        assert not evals_only.legends
    finally:
        plt.close(mixed)
        plt.close(evals_only)


@pytest.mark.parametrize("label", ["ct/minilm_l3/paraphrase-MiniLM-L3-v2/seed0",
                                   "quickstart/sbert_nli/sentence-transformers-all-MiniLM-L6-v2-long/seed42",
                                   "x" * 90])
def test_long_labels_wrap_to_two_lines_and_keep_their_end(label):
    lines = wrap_label(label).split("\n")
    assert len(lines) == 2 and all(len(line) <= LABEL_CHARS for line in lines)
    assert lines[-1].endswith(label[-5:])
    assert wrap_label("ct/x/seed0") == "ct/x/seed0"
