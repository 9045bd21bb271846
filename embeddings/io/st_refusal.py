"""A ``modules.json`` that makes sentence-transformers refuse an export whose vectors it cannot compute.

It names ``NotSentenceTransformers``, a class outside sentence-transformers: refused unless ``trust_remote_code=True``,
and then its ``load`` raises one line saying how to load the export."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sts_lightning.embeddings.errors import ConfigError

REASON_FILE = "sentence_transformers_refusal.json"


class NotSentenceTransformers:
    """Stands in ``modules.json`` for a representation sentence-transformers cannot compute; never built."""

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **_: object) -> NotSentenceTransformers:
        raise ConfigError(refusal_message(model_name_or_path))


def refusal_message(folder: str | os.PathLike) -> str:
    """The line ``SentenceTransformer(folder, trust_remote_code=True)`` raises: what it is, how to load it."""
    file = Path(folder).expanduser() / REASON_FILE
    try:
        reason = str(json.loads(file.read_text())["reason"])
    except (OSError, ValueError, KeyError, TypeError):
        reason = "its representation is not a sentence-transformers pipeline"
    return (f"{folder} cannot be loaded by sentence-transformers: {reason}; load it with "
            f"sts_lightning.load({str(folder)!r}) (pip install sts-lightning), or score it with the evaluate.py "
            "line of its LOADING.md")


def write_refusal(folder: str | os.PathLike, reason: str) -> None:
    """``modules.json`` naming ``NotSentenceTransformers`` and ``REASON_FILE`` (why), into an export being written."""
    folder = Path(folder)
    kind = f"{NotSentenceTransformers.__module__}.{NotSentenceTransformers.__qualname__}"
    (folder / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": kind}], indent=2))
    (folder / REASON_FILE).write_text(json.dumps({"reason": reason}, indent=2) + "\n")


def custom_module_types(folder: str | os.PathLike) -> list[str]:
    """The ``modules.json`` types outside sentence-transformers (``[]`` without a ``modules.json``): loading the
    directory then needs ``trust_remote_code=True``, and for ``NotSentenceTransformers`` it is refused."""
    file = Path(folder) / "modules.json"
    try:
        entries = json.loads(file.read_text())
    except (OSError, ValueError):
        return []
    return [str(e.get("type")) for e in entries if isinstance(e, dict)
            and not str(e.get("type", "")).startswith("sentence_transformers.")]


def refused(folder: str | os.PathLike) -> bool:
    """Whether ``folder``'s ``modules.json`` is the refusal."""
    return any(t.endswith("." + NotSentenceTransformers.__qualname__) for t in custom_module_types(folder))


def is_cross_encoder(folder: str | os.PathLike) -> bool:
    """A sentence-transformers ``CrossEncoder`` directory (a pair model: ``CrossEncoder(path).predict``, no vectors)."""
    config = Path(folder) / "config_sentence_transformers.json"
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("model_type") == "CrossEncoder"
    except (OSError, ValueError, AttributeError):
        return False
