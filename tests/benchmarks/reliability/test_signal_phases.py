"""The signal benchmark's table and comparison (its runs take half an hour: run it by hand, docs/reliability.md)."""

from __future__ import annotations

import pytest
import torch

from benchmarks.reliability.signal_phases import CHAIN, TEACHER_ROWS, compare, main, stopped_line, table
from sts_lightning.datamodules.distillation import DistillationDataModule
from sts_lightning.embeddings import stop_request


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



def test_the_teacher_rows_wait_for_the_stretches_the_code_names(tmp_path):
    """A row whose phase name the code no longer uses would wait for its marker until the run ended."""
    wanted = {where for _, _, where in TEACHER_ROWS.values()}
    for combine, teacher in (("mean", "multilingual-e5-small"), ("each", "all-MiniLM-L6-v2")):
        dm = DistillationDataModule(teachers=[teacher], combine=combine, cache_dir=str(tmp_path))
        with dm._encoding(teacher):
            assert stop_request._where in wanted
    assert TEACHER_ROWS["views"][2] == "encoding cross-view AE source all-MiniLM-L6-v2"  # source_views' stretch
    log = tmp_path / "x.log"
    log.write_text("[..] a line\nstopped: SIGTERM while x: stopped\n")
    assert stopped_line(log) == "stopped: SIGTERM while x: stopped"
    with pytest.raises(SystemExit):  # an unknown row: one line from argparse, before anything runs
        main(["--rows", "sed-e6", "--out", str(tmp_path / "out")])
