"""Run a block without touching the run's random streams: model building, loading, caching and evaluation.

Why: a run's randomness must be a function of its seed and its config alone. Anything that draws random numbers
only *sometimes* shifts every later draw of the run: building ``bert-random-4x256`` or converting the packaged
ONNX MiniLM on an empty model cache (a ``BertModel(config)`` initialises its weights from the global generator, and
the random BERT even re-seeded it), initialising a head that a checkpoint lacks, encoding teachers into a feature
cache that a warm cache skips. Measured before this existed: the quickstart's weights after 5 steps differed in 69
of 71 tensors between a run on an empty cache and the same command on the warm one.

``isolated_rng()`` saves torch's CPU generator (and the generators of CUDA devices already initialised), Python's
``random`` and NumPy's global state, runs the block, and puts them all back: the block may draw (its own draws are
then seeded by the run's current state, so they are still reproducible), but the run continues as if it had not
run. ``isolated_rng(seed)`` also seeds torch inside the block, so what it builds is a pure function of ``seed``
(the random BERT's weights on every machine). CUDA is seeded only on devices already initialised: a
``torch.cuda.manual_seed_all`` before CUDA starts is queued and replayed at its start, which would override the
run's own seed there.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


def _initialised_cuda_devices() -> list[int]:
    import torch

    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() and torch.cuda.is_initialized() else []


@contextmanager
def isolated_rng(seed: int | None = None) -> Iterator[None]:
    """Run the block with torch / NumPy / ``random`` state restored afterwards; optionally seeded inside.

    torch and NumPy are imported here, not at the top: this module sits under the packaged-model code that
    ``--help`` imports without torch.
    """
    import numpy as np
    import torch

    devices = _initialised_cuda_devices()
    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=devices):
            if seed is not None:
                torch.default_generator.manual_seed(int(seed))
                for device in devices:
                    torch.cuda.default_generators[device].manual_seed(int(seed))
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


def rng_isolated(function: Callable[..., T]) -> Callable[..., T]:
    """Decorator form of ``isolated_rng()`` for functions that build, load or cache (see the module docstring)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with isolated_rng():
            return function(*args, **kwargs)

    return wrapper
