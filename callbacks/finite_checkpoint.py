"""``ModelCheckpoint`` that never ranks a non-finite score as a best model (Lightning turns NaN into -inf and,
while fewer than ``save_top_k`` checkpoints exist, saves it anyway).
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
