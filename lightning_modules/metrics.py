"""Training metrics that span ranks: one place that builds them, so every method's accuracy means the same thing.

Why torchmetrics: a per-rank accuracy averaged by hand weights ranks equally whatever their counts, and a
``self.log(..., sync_dist=True)`` of a float averages means; a torchmetrics metric sums correct and total counts over
ranks before dividing, so a logged accuracy is the one of a single process over the global batch.
"""

from __future__ import annotations

from torchmetrics.classification import MulticlassAccuracy


def accuracy(num_classes: int, sync_on_step: bool = False) -> MulticlassAccuracy:
    """Share of predictions that are right (micro average: every prediction counts once), summed across ranks.

    ``sync_on_step``: sync at every ``forward`` (a logged per-step value over the global batch; one small
    all-reduce a step), else only when an epoch's value is computed.
    """
    return MulticlassAccuracy(num_classes=int(num_classes), average="micro", validate_args=False,
                              dist_sync_on_step=sync_on_step)
