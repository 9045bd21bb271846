"""Training metrics that span ranks: one place that builds them, so every method's accuracy means the same thing.

Why torchmetrics: it sums correct and total counts over ranks before dividing (``sync_dist=True`` of a float
averages means), so a logged accuracy is the one of a single process over the global batch.
"""

from __future__ import annotations

from torchmetrics.classification import MulticlassAccuracy


def accuracy(num_classes: int, sync_on_step: bool = False) -> MulticlassAccuracy:
    """Micro-averaged accuracy summed across ranks; ``sync_on_step``: at every ``forward`` (one small all-reduce a
    step, for a logged per-step value), else only when an epoch's value is computed."""
    return MulticlassAccuracy(num_classes=int(num_classes), average="micro", validate_args=False,
                              dist_sync_on_step=sync_on_step)
