"""The one place a training checkpoint (``.ckpt``) is read: weights only (a crafted pickle runs code), with one-line
errors naming the file (a truncated one raises a miniz error naming neither the file nor a fix)."""

from __future__ import annotations

import os
import pickle
from typing import Any

import torch

from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.input_file import require_file


def load_checkpoint(path: str | os.PathLike, mmap: bool = True) -> dict[str, Any]:
    """The checkpoint's contents (tensors on CPU and plain values), else ``DataError`` with the path; ``mmap=False``
    reads the tensors (a resume: optimizer state must not stay file-backed)."""
    path = require_file(path, "checkpoint file")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError:
        raise DataError(f"{path}: refusing to load: it holds Python objects other than tensors and plain values, "
                        "which could run code; our checkpoints never do, so this file was not written by this "
                        "project (or was tampered with)") from None
    except (RuntimeError, EOFError, OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"{path}: not a readable checkpoint (truncated or corrupted?): {first}") from None
    if not isinstance(ckpt, dict):
        raise DataError(f"{path}: not a training checkpoint (holds a {type(ckpt).__name__}, not a dict)")
    return ckpt
