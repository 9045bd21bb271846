"""sts-lightning under one import name.

Why one name: installing the project must not put ``embeddings``, ``sts``, ``runs`` or ``callbacks`` at the top of
a user's import path, where PyPI packages of those names (and Hugging Face's ``evaluate``) live. The card keeps those
folders at the repository's top level, so they are mapped here as sub-packages: ``setup.py``'s ``package_dir``
does it for an install (editable or wheel), and ``__path__`` below does it for a checkout used without installing.

The public API (``load``, ``train``) is imported lazily, so ``import sts_lightning`` stays cheap (no torch) for
``--help``. ``sts_lightning.train`` is also the ``sts-train`` command's module; once imported it stands in this
package's namespace, and calling it calls the API (see ``sts_lightning/train.py``).
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
