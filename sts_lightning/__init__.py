"""sts-lightning under one import name, so ``embeddings``, ``sts``, ``runs`` ... never sit at the top of a user's
import path (PyPI has packages of those names). The top-level folders are mapped in as sub-packages: by
``setup.py``'s ``package_dir`` when installed, by ``__path__`` below in a checkout. ``load`` and ``train`` are
imported lazily, so ``import sts_lightning`` stays torch-free for ``--help``.
"""
from __future__ import annotations

from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
if (_CHECKOUT / "train.py").is_file() and (_CHECKOUT / "embeddings" / "__init__.py").is_file():
    __path__.append(str(_CHECKOUT))  # noqa: F821 -- a package's own search path, see the docstring

__all__ = ["load", "train", "Run"]


def __getattr__(name: str):
    if name == "load":
        from sts_lightning.api import load  # deferred: the API imports torch
        return load
    if name == "train":
        from sts_lightning.training import train  # deferred: Hydra and the run's checks
        return train
    if name == "Run":
        from sts_lightning.training import Run
        return Run
    raise AttributeError(f"module 'sts_lightning' has no attribute {name!r}")
