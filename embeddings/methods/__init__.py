"""The methods: one module or package per method, each declaring the scorers it offers.

Why declared here and not in a central map: adding a method should touch its own folder, not the registry.
Each method module (``pooling.py``, ``sbert_wk.py``) or package ``__init__`` (``flow/``, ``latte_mix/``,
``meta/``, ``sen2pro/``) may set ``SCORERS = {name: "module:Class"}``, a plain literal (``--help`` reads it
without importing torch); ``embeddings.scoring.registry`` collects them in :func:`method_modules` order.
"""

from __future__ import annotations

import pkgutil

FIRST = "pooling"  # the baselines lead every listing


def method_modules() -> list[str]:
    """Dotted names of the method modules and packages, ``pooling`` first, then alphabetical."""
    names = [info.name for info in pkgutil.iter_modules(__path__)]
    return [f"{__name__}.{n}" for n in sorted(names, key=lambda n: (n != FIRST, n))]
