"""The contracts between layers, as protocols checked up front (``tests/embeddings/scoring/test_protocols.py``).

``Scorable``: a scorer on a module's LIVE modules; ``Exportable``: ``export(path)`` writes a directory ``evaluate.py``
loads; ``TrainedMethod``: both (every LightningModule); ``BatchedScorer``: batch size settable for one call.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.io.model_card import TrainingFacts
from sts_lightning.embeddings.scoring.reading import Reading
from sts_lightning.embeddings.scoring.scorer import Scorer


@runtime_checkable
class Scorable(Protocol):
    def scorer(self) -> Scorer: ...


@runtime_checkable
class Exportable(Protocol):
    """``training``: the run's facts for the model card; ``None`` outside a training run."""

    def export(self, path: str | os.PathLike, training: TrainingFacts | None = None) -> Path: ...


@runtime_checkable
class TrainedMethod(Scorable, Exportable, Protocol):
    """A trainable method: scored during training and exported after it."""


@runtime_checkable
class ReadingScorer(Protocol):
    """What a scorer offers the shared forward pass. ``"pooled"``: ``from_pooled(x: (n, d))``; ``"layer"``:
    ``from_layer(view, sentences)`` (``view`` serves the layer as hidden state -1), equal to its own ``represent``."""

    encoder: BaseEncoder

    def reading(self) -> Reading: ...


@runtime_checkable
class BatchedScorer(Protocol):
    batch_size: int


@runtime_checkable
class STSEvaluator(Protocol):
    """The STS callback as a module sees it (``lightning_modules/`` never imports ``callbacks/``)."""

    task_names: Sequence[str]
    every_n_epochs: int

    def evaluate(self, trainer, pl_module) -> dict[str, float]: ...
