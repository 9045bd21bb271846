"""Run a block without touching the run's random streams: model building, loading, caching and evaluation.

A run's randomness must be a function of its seed and config alone, but building a model on an empty cache or
encoding into a cold cache draws only *sometimes*. CUDA is seeded only on initialised devices (a seed queued before
CUDA starts would override the run's own).
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
    """Run the block with torch / NumPy / ``random`` state restored afterwards; with ``seed``, torch is seeded inside
    (imported here: ``--help`` imports this module without torch)."""
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
