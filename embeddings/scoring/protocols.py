"""The contracts between layers, as protocols instead of attribute sniffing.

Why: the STS callback, the export step and the shared forward pass used to ask ``getattr(x, "scorer")`` or
``hasattr(x, "pool")``; a typo or a half-implemented method then failed late, deep inside a run. A protocol
names the contract in one place, ``isinstance`` checks it up front, and a test (``tests/embeddings/scoring/test_protocols.py``)
checks that every ``configs/model/*.yaml`` module honours it.

- ``Scorable``: what a trainable module offers the STS callback (``callbacks/sts_evaluation.py``): a scorer
  built on its LIVE modules, so evaluation during training sees the current weights.
- ``Exportable``: what it offers ``train.py``'s export step (``runs/train_run.py``): ``export(path)`` writes a
  directory that ``evaluate.py`` (and, where possible, ``SentenceTransformer``) loads, and returns its path.
- ``TrainedMethod``: both; every LightningModule of ``lightning_modules/`` is one.
- ``ReadingScorer``: what a scorer offers the shared forward pass (``embeddings/scoring/shared_pass.py``): its
  encoder and the ``Reading`` it reads from it (``embeddings.scoring.reading``: a pooled vector of a named pooling,
  or one layer's token states), plus what it does with it: ``from_pooled(vectors) -> Representation`` (a pooling:
  the vectors; whitening: ``(x - mu) @ W``; BERT-flow: the Glow) or ``from_layer(view, sentences)`` (Latte-Mix:
  its posterior over the token states ``view`` serves).
- ``BatchedScorer``: a scorer whose batch size the caller may set for one call (the STS callback's own).
- ``STSEvaluator``: what a module may ask of the STS callback: Contrastive Tension finds it among
  ``trainer.callbacks`` by this API and scores its two copies with ``evaluate`` (``lightning_modules/`` never
  imports ``callbacks/``).
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
    """``training``: the run's facts for the export's model card (``embeddings.io.model_card``); ``None`` when
    the export is written outside a training run."""

    def export(self, path: str | os.PathLike, training: TrainingFacts | None = None) -> Path: ...


@runtime_checkable
class TrainedMethod(Scorable, Exportable, Protocol):
    """A trainable method: scored during training (``scorer()``) and exported after it (``export(path)``)."""


@runtime_checkable
class ReadingScorer(Protocol):
    """``reading().kind == "pooled"``: the scorer also has ``from_pooled(x: (n, d)) -> Representation``;
    ``"layer"``: ``from_layer(view: BaseEncoder, sentences) -> Representation`` (``view`` serves the layer as
    hidden state -1). Its ``represent`` must equal ``from_*`` of its own encoder's pass (a test checks each kind)."""

    encoder: BaseEncoder

    def reading(self) -> Reading: ...


@runtime_checkable
class BatchedScorer(Protocol):
    batch_size: int


@runtime_checkable
class STSEvaluator(Protocol):
    """The STS callback as a module sees it (``callbacks.sts_evaluation.STSEvaluationCallback`` offers it)."""

    task_names: Sequence[str]
    every_n_epochs: int

    def evaluate(self, trainer, pl_module) -> dict[str, float]: ...
