"""``model.matryoshka_dims`` / ``_weights`` for an ``EncoderModule``: checked against the method and the model.

A method takes them where its loss goes through ``with_matryoshka`` (its class's ``matryoshka_ok``); every other
refuses them with the line ``runs/`` gives before torch loads.
"""

from __future__ import annotations

from collections.abc import Sequence

from sts_lightning.embeddings.encoders.widths import width_on_disk
from sts_lightning.embeddings.methods.shared.matryoshka import (
    check_matryoshka,
    check_matryoshka_fits,
    refused,
)

Prefixes = tuple[tuple[int, ...], tuple[float, ...]]


def matryoshka_prefixes(module: object, dims: Sequence[int] | None, weights: Sequence[float] | None,
                        model_name_or_path: str) -> Prefixes | None:
    """``(dims, weights)`` or ``None``, checked against the method and the model's width before it loads."""
    prefixes = check_matryoshka(dims, weights)
    if prefixes and not module.matryoshka_ok:
        raise refused(type(module).__name__, module.matryoshka_refused)
    width = width_on_disk(model_name_or_path)
    if prefixes and width is not None:
        check_matryoshka_fits(prefixes[0], width)
    return prefixes
