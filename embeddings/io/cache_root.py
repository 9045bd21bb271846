"""The one directory every cache of the project lives under.

Why one place: line indexes, feature caches, source vectors and hub text files all need a writable home that
a user can move (a fast disk, a shared cluster cache) with one environment variable, ``STS_CACHE_DIR``.
"""

from __future__ import annotations

import os

DEFAULT_CACHE = os.environ.get("STS_CACHE_DIR", "~/.cache/sts-lightning")
