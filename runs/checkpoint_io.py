"""Checkpoints written atomically beside their target and read back through the one checked loader.

Lightning's ``TorchCheckpointIO`` moves a file from the system temp directory over ``last.ckpt``: across file
systems a copy, which a kill truncates. Here it sits beside the target and is fsynced before the rename; a full disk
raises ``DiskFullError`` while ``last.ckpt`` stays the previous one. Remote paths keep Lightning's behaviour.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from sts_lightning.embeddings.io.atomic import atomic_file
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint
from sts_lightning.embeddings.io.disk_full import payload_bytes
from sts_lightning.runs.checkpoint_links import SameStepLinks


def _local(path: Any) -> bool:
    return "://" not in str(path) or str(path).startswith("file://")


class AtomicCheckpointIO(TorchCheckpointIO):
    """``TorchCheckpointIO`` whose local saves are atomic and durable, and whose loads are checked."""

    def __init__(self) -> None:
        super().__init__()
        self.links = SameStepLinks()

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        if storage_options is not None or not _local(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        target = Path(str(path).removeprefix("file://"))
        if self.links.link_instead(checkpoint, target):
            return None
        with atomic_file(target, needed=payload_bytes(checkpoint)) as tmp, open(tmp, "wb") as fh:
            torch.save(checkpoint, fh)
            fh.flush()
            os.fsync(fh.fileno())
        self.links.written(checkpoint, target)
        return None

    def load_checkpoint(self, path: Any, map_location: Any | None = None,
                        weights_only: bool | None = None) -> dict[str, Any]:
        if not _local(path):
            return super().load_checkpoint(path, map_location=map_location, weights_only=True)
        return load_checkpoint(str(path).removeprefix("file://"), mmap=False)
