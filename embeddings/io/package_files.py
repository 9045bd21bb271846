"""Where the package's own files are, the same way in a checkout and in an installed wheel (the configs are package
data two levels above this file in both); :data:`CHECKOUT` is ``None`` in a wheel (no ``pyproject.toml``)."""

from __future__ import annotations

from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the checkout, or site-packages/sts_lightning
CONFIG_DIR = PACKAGE_ROOT / "configs"
CHECKOUT: Path | None = PACKAGE_ROOT if (PACKAGE_ROOT / "pyproject.toml").is_file() else None
