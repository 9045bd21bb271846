"""``ModelCheckpoint`` that never ranks a non-finite score as a best model.

Why: Lightning turns a NaN monitor value into -inf and, while fewer than ``save_top_k`` checkpoints exist,
saves it anyway, so a diverged run left a ``best-*.ckpt`` scored -inf beside a log saying NaN is never ranked.
"""

from __future__ import annotations

import math

import torch
from lightning.pytorch.callbacks import ModelCheckpoint


class FiniteModelCheckpoint(ModelCheckpoint):
    def check_monitor_top_k(self, trainer, current: torch.Tensor | None = None) -> bool:
        if current is not None and not math.isfinite(float(current)):
            return False
        return super().check_monitor_top_k(trainer, current)
