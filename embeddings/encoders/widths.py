"""An encoder's vector size read from the disk alone (no torch, no weights), so ``model.matryoshka_dims=[1024]`` on
a 384-d model is refused before anything loads; ``None`` when only loading would tell."""

from __future__ import annotations

import json
from pathlib import Path

from sts_lightning.embeddings.encoders.backbone_names import hub_cache_dir
from sts_lightning.embeddings.encoders.packaged import packaged_model

__all__ = ["width_on_disk"]

# config.json keys of the hidden size: BERT-likes, DistilBERT, T5-likes (what transformers' attribute_map maps)
SIZE_KEYS = ("hidden_size", "dim", "d_model")


def _config_width(config: Path) -> int | None:
    try:
        values = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # unreadable here: the loader says why
    size = next((values[k] for k in SIZE_KEYS if isinstance(values, dict) and k in values), None)
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


def _hub_config(name: str) -> Path | None:
    """The ``config.json`` of a hub model already in the Hugging Face cache (its newest snapshot), else ``None``."""
    snapshots = hub_cache_dir() / f"models--{name.replace('/', '--')}" / "snapshots"
    found = sorted(snapshots.glob("*/config.json"), key=lambda p: p.stat().st_mtime) if snapshots.is_dir() else []
    return found[-1] if found else None


def width_on_disk(name: str) -> int | None:
    """The vector size of the encoder ``name`` (packaged name, model directory or export, cached hub id), else
    ``None`` when only loading it would tell."""
    model = packaged_model(str(name))
    if model is not None:
        return model.width
    folder = Path(str(name)).expanduser()
    config = folder / "config.json" if folder.is_dir() else _hub_config(str(name)) if "/" in str(name) else None
    return _config_width(config) if config is not None and config.is_file() else None
