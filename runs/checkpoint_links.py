"""One file for a checkpoint saved twice at one step: ``best-step<N>.ckpt`` and ``last.ckpt`` as hard links.

Two callbacks write them, so at the step of a new best both wrote the whole state. A save at the same step, into
the same directory, under the other role, with the same weights is linked: a best file to ``last.ckpt``'s file, or
``last.ckpt`` written in full and the best name pointed at it. Every name is replaced atomically (a new directory
entry), so a later ``last.ckpt`` never touches the best file. Without hard links both are written.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import torch

from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.atomic import remove_orphans, temp_path
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint

log = logging.getLogger(__name__)
LAST = "last.ckpt"


def same_weights(state: Any, path: Path) -> bool:
    """Whether ``path``'s ``state_dict`` equals ``state`` (the one being saved), tensor for tensor."""
    if not isinstance(state, dict):
        return False
    try:
        other = load_checkpoint(path, mmap=True).get("state_dict")
    except DataError:
        return False
    if not isinstance(other, dict) or other.keys() != state.keys():
        return False
    for key, value in state.items():
        saved = other[key]
        if torch.is_tensor(value) != torch.is_tensor(saved):
            return False
        if not torch.is_tensor(value):
            if value != saved:
                return False
        elif value.dtype != saved.dtype or value.shape != saved.shape or not torch.equal(value.detach().cpu(), saved):
            return False
    return True


def hard_link(source: Path, target: Path) -> bool:
    """``target`` becomes another name of ``source``'s file, atomically; ``False`` where hard links fail."""
    remove_orphans(target)
    tmp = temp_path(target)
    try:
        os.link(source, tmp)
        os.replace(tmp, target)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        log.info("checkpoint %s written in full: no hard link to %s here (%s)", target, source, err.strerror or err)
        return False
    return True


class SameStepLinks:
    """The last checkpoint file this process wrote (path, global step, inode) and the two linking rules."""

    def __init__(self) -> None:
        self.previous: tuple[Path, int, int] | None = None

    def _twin(self, checkpoint: dict, target: Path) -> Path | None:
        """The file saved just before under the other role, still that file, if ``checkpoint`` may link to it."""
        if self.previous is None:
            return None
        path, step, inode = self.previous
        if (step != checkpoint.get("global_step") or path.parent != target.parent
                or (path.name == LAST) == (target.name == LAST)):
            return None
        try:
            if path.stat().st_ino != inode:
                return None
        except OSError:
            return None
        return path if same_weights(checkpoint.get("state_dict"), path) else None

    def link_instead(self, checkpoint: dict, target: Path) -> bool:
        """A best file after ``last.ckpt`` of its step, with its weights: linked to it (``True``), nothing to write."""
        if target.name == LAST:
            return False
        twin = self._twin(checkpoint, target)
        if twin is None or not hard_link(twin, target):
            return False
        log.info("%s is %s's file (same step, same weights): one copy on disk", target.name, twin.name)
        self._remember(checkpoint, target)
        return True

    def written(self, checkpoint: dict, target: Path) -> None:
        """After a full write: ``last.ckpt`` after the best file of its step, with its weights, takes its name."""
        twin = self._twin(checkpoint, target) if target.name == LAST else None
        if twin is not None and hard_link(target, twin):
            log.info("%s is %s's file (same step, same weights): one copy on disk", twin.name, target.name)
        self._remember(checkpoint, target)

    def _remember(self, checkpoint: dict, target: Path) -> None:
        step = checkpoint.get("global_step")
        self.previous = (target, step, target.stat().st_ino) if isinstance(step, int) else None
