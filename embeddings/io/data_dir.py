"""The default data directory: ``$STS_DATA_DIR``, else ``../shared/data`` beside a checkout where it exists. In
layer 0: the STS readers and the packaged models built from local text (DiffCSE's generator) share it."""

from __future__ import annotations

import os
from pathlib import Path

from sts_lightning.embeddings.io.package_files import CHECKOUT

DATA_DIR_ENV = "STS_DATA_DIR"
# The default beside a checkout only: an installed package needs $STS_DATA_DIR or paths.data_dir.
CHECKOUT_DATA_DIR = CHECKOUT.parent / "shared" / "data" if CHECKOUT is not None else None


def default_data_dir() -> str | Path | None:
    """``$STS_DATA_DIR``, else ``../shared/data`` beside the checkout where it exists, else ``None``."""
    checkout_default = CHECKOUT_DATA_DIR if CHECKOUT_DATA_DIR is not None and CHECKOUT_DATA_DIR.is_dir() else None
    return os.environ.get(DATA_DIR_ENV) or checkout_default
