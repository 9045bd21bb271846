"""One entry point from an encoder name in a config to a ``BaseEncoder``: a bad name fails here, listing what works."""

from __future__ import annotations

from pathlib import Path

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.encoders.checkpoint import encoder_from_checkpoint
from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.encoders.packaged import (
    is_packaged,
    packaged_model,
    packaged_names,
    resolve_model_path,
)
from sts_lightning.embeddings.encoders.static import StaticWordEncoder
from sts_lightning.embeddings.encoders.token_budget import check_batching
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.isolated_rng import rng_isolated


@rng_isolated  # loading (a packaged model built on first use, a checkpoint's module) never moves the run's RNG
def load_encoder(name: str, max_length: int | None = None, batch_size: int | None = None,
                 device: str = "cpu", precision: str = "fp32", max_tokens: int | None = None,
                 packing: str = "auto") -> BaseEncoder:
    """Build the encoder for a packaged short name (offline), a local model directory (exports included), a training
    checkpoint ``*.ckpt``, or a hub name (online); static word vectors stay fp32 whatever ``precision``."""
    name = str(name)
    if name.endswith(".ckpt"):

        return encoder_from_checkpoint(name, max_length=max_length, batch_size=batch_size, device=device,
                                       precision=precision, max_tokens=max_tokens, packing=packing)
    packaged = packaged_model(name)
    if packaged is not None and packaged.kind == "static":
        check_batching(batch_size, max_tokens)
        static = StaticWordEncoder.from_package(batch_size=batch_size, device=device, max_length=max_length)
        static.max_tokens = max_tokens
        return static

    try:
        return HFEncoder.from_pretrained(name, max_length=max_length, batch_size=batch_size, device=device,
                                         precision=precision, max_tokens=max_tokens, packing=packing)
    except DataError:
        raise  # a damaged model directory: its own message names the file
    except (OSError, ValueError) as err:  # ConfigError is a ValueError
        if is_packaged(name):
            raise  # already says which package to install
        where = "a local directory that does not hold a loadable model" if Path(name).expanduser().is_dir() \
            else "not a local directory, and not loadable from the Hugging Face hub (offline here?)"
        raise ConfigError(
            f"cannot load encoder {name!r}: {where}. Packaged short names (offline): "
            f"{', '.join(packaged_names())}. Underlying error: {err}"
        ) from err


def encoder_hidden_size(model_name_or_path: str) -> int:
    """The pooled-vector width of an encoder, from its config alone when it is a transformer (no weights loaded)."""
    try:
        from transformers import AutoConfig

        return int(AutoConfig.from_pretrained(resolve_model_path(model_name_or_path)).hidden_size)
    except (ConfigError, OSError, ValueError, AttributeError):  # static word vectors, or no config
        return int(load_encoder(model_name_or_path).hidden_size)
