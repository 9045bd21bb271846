"""The signal benchmark's table and comparison (its runs take half an hour: run it by hand, docs/reliability.md)."""

from __future__ import annotations

import torch

from benchmarks.signal_phases import CHAIN, compare, table


def test_the_table_says_when_a_run_ended_before_its_signal():
    text = table([("export", 1.25, 75, 30), ("end scoring", None, 0, None)])
    assert text.splitlines()[2:] == ["| export | 1.2 | 75 | 30 |", "| end scoring | ended before the signal | 0 | none |"]
    assert [label for label, *_ in CHAIN] == ["STS scoring before training", "validation mid-training", "end scoring",
                                             "export"]


def test_one_differing_weight_is_reported():
    state = {"step": 30, "state": {"w": torch.zeros(2)}, "table": "t", "export": {"a": "1"}, "card": ["x"]}
    assert all(compare(state, dict(state)).values())
    other = {**state, "state": {"w": torch.tensor([0.0, 1e-7])}}
    assert compare(state, other) == {"step": True, "weights": False, "STS table": True, "export files": True,
                                     "model card": True}
