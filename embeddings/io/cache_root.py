"""The one directory every cache of the project lives under, moved by ``STS_CACHE_DIR`` (default
``~/.cache/sts-lightning``); the packaged models live in ``<root>/models`` (``STS_LIGHTNING_CACHE`` still honoured
for them, with a deprecation warning).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

CACHE_ENV = "STS_CACHE_DIR"
DEFAULT_ROOT = "~/.cache/sts-lightning"
LEGACY_MODELS_ENV = "STS_LIGHTNING_CACHE"  # deprecated: the packaged-models cache before it moved under the root
_warned: set[str] = set()


def cache_root() -> Path:
    """``$STS_CACHE_DIR`` or ``~/.cache/sts-lightning``, user-expanded; read at call time."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_ROOT).expanduser()


def cache_dir_or_root(cache_dir: str | os.PathLike | None) -> Path:
    """A configured cache directory (user-expanded), or the cache root when none is given."""
    return Path(cache_dir).expanduser() if cache_dir else cache_root()


def models_cache_dir() -> Path:
    """Where packaged models are materialised: ``<root>/models``; ``$STS_LIGHTNING_CACHE/models`` while the
    deprecated variable is set (so existing model caches are still found), with a warning logged once."""
    legacy = os.environ.get(LEGACY_MODELS_ENV)
    if legacy:
        if legacy not in _warned:
            _warned.add(legacy)
            log.warning("%s is deprecated: set %s=<dir> instead (models then live in <dir>/models); using %s/models",
                        LEGACY_MODELS_ENV, CACHE_ENV, legacy)
        return Path(legacy).expanduser() / "models"
    return cache_root() / "models"

