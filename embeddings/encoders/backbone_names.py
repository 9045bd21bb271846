"""Is a backbone name one that can load here? Answered from names and the disk alone, before torch is imported.

Refused early: a name not packaged, on disk or in the HF cache when the hub is off, or a bare name that is a typo of a
packaged one (``all-MiniLM-L6-v3``); an ``owner/name`` hub id still goes to the hub.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sts_lightning.embeddings.encoders.packaged import PACKAGED_MODELS, packaged_model, packaged_names
from sts_lightning.embeddings.errors import closest_first, did_you_mean

HUB_ID = re.compile(r"(?:[A-Za-z0-9_][\w.-]*/)?[A-Za-z0-9_][\w.-]*\Z")  # huggingface_hub's validate_repo_id
TYPO_CUTOFF = 0.85  # difflib ratio: all-MiniLM-L6-v3 vs -v2 is 0.94, bert-base-uncased vs bert-random-4x256 0.59


def hub_offline() -> bool:
    """True when the environment switches the Hugging Face hub off (what ``huggingface_hub`` reads)."""
    return any(os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on")
               for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_cache_dir() -> Path:
    """Where ``huggingface_hub`` keeps downloaded models (its own order of environment variables)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(xdg).expanduser() / "huggingface" / "hub"


def in_hub_cache(name: str) -> bool:
    return "/" in name and (hub_cache_dir() / f"models--{name.replace('/', '--')}").is_dir()


def hub_like(name: str) -> bool:
    """Could ``name`` be a hub model id (``owner/name`` or a bare name)? A path, a ``.ckpt`` or a name with spaces cannot."""
    return bool(HUB_ID.match(name)) and len(name) <= 96 and ".." not in name and "--" not in name \
        and not name.endswith(".ckpt")


def packaged_hint(name: str) -> str:
    """``packaged names, closest first: a, b, ...``: what would have worked offline, the likeliest at the head."""
    return f"packaged names (offline), closest first: {', '.join(closest_first(name, PACKAGED_MODELS))}"


def backbone_problem(key: str, name: object, also: tuple[str, ...] = ()) -> str | None:
    """One line saying why the backbone ``name`` (configured at ``key``) cannot load here, else ``None``; ``also``:
    further names that are valid here (a source's ``multilingual-e5-small``)."""
    if not isinstance(name, str) or not name or name in also or packaged_model(name) is not None:
        return None
    if Path(name).expanduser().exists() or in_hub_cache(name):
        return None
    guess = did_you_mean(name, [*packaged_names(), *also], cutoff=TYPO_CUTOFF)
    if not hub_offline() and hub_like(name) and ("/" in name or guess is None):
        return None  # a hub id: the loader asks the hub
    why = "HF_HUB_OFFLINE is set" if hub_offline() else \
        "a hub id is owner/name" if hub_like(name) else "it is no hub id either (a path, or not owner/name)"
    mean = f"; did you mean {guess!r}?" if guess else ""
    return (f"unknown backbone {key}={name!r}{mean} (not packaged, no such path, not in the Hugging Face cache, "
            f"and {why}; {packaged_hint(name)})")
