"""``runs.checkpoint_io.AtomicCheckpointIO`` on a full disk: the previous checkpoint stays, one line (issue 30).

``torch.save`` hides ENOSPC inside ``RuntimeError("... unexpected pos ...")``; the save must still end in a
``DiskFullError`` naming the checkpoint and its size (the bytes of its tensors), with no temporary file left.
"""

from __future__ import annotations

import hashlib

import pytest
import torch

from sts_lightning.embeddings.errors import DiskFullError
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint
from sts_lightning.embeddings.io.disk_full import human_bytes, mount_point
from sts_lightning.runs.checkpoint_io import AtomicCheckpointIO
from tests.disk_quota import disk_full


def test_a_full_disk_keeps_the_previous_checkpoint_and_names_its_size(tmp_path):
    target = tmp_path / "checkpoints" / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint({"global_step": 1, "state_dict": {"w": torch.ones(10)}}, target)
    before = hashlib.sha256(target.read_bytes()).hexdigest()
    state = {"global_step": 2, "state_dict": {"w": torch.zeros(50_000)},
             "optimizer_states": [{"state": {0: {"exp_avg": torch.zeros(50_000)}}}]}
    with disk_full("last.ckpt", nbytes=4096) as quota, pytest.raises(DiskFullError) as err:
        io.save_checkpoint(state, target)
    assert len(quota.failed) == 1
    assert hashlib.sha256(target.read_bytes()).hexdigest() == before
    assert load_checkpoint(target)["global_step"] == 1
    assert sorted(p.name for p in target.parent.iterdir()) == ["last.ckpt"]  # no temporary copy
    assert str(err.value).startswith(f"no space left on device writing {target}: needs ~{human_bytes(400_000)}, ")
    assert str(err.value).endswith(f" free on {mount_point(target)}")
