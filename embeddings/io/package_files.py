"""Where the package's own files are, the same way in a checkout and in an installed wheel.

Why one module: the configs are package data. A wheel installs them as ``sts_lightning/configs`` beside
``sts_lightning/embeddings``; a checkout keeps them as ``configs/`` beside ``embeddings/`` (setup.py maps that
folder to ``sts_lightning.configs``). In both, they are two levels above this file, so every reader of the
configs (the entry points, ``--help``, the override check, pipelines, the Python API) finds them here and none
needs the checkout. Only a checkout has ``pyproject.toml`` at that level: :data:`CHECKOUT` is ``None`` in an
installed wheel, so nothing there looks for files beside site-packages (``../shared/data`` is a checkout's
default data directory, not an installed package's).
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the checkout, or site-packages/sts_lightning
CONFIG_DIR = PACKAGE_ROOT / "configs"
CHECKOUT: Path | None = PACKAGE_ROOT if (PACKAGE_ROOT / "pyproject.toml").is_file() else None
