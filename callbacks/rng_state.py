"""Random-number-generator state in every checkpoint, restored right before the first resumed batch.

Why: ``train()`` re-seeds at start, so a resumed run would draw other dropout masks than the uninterrupted one.
``load_state_dict`` is too early: building the resumed loader's iterator draws from the global torch RNG. Stored as
tensors, ints and floats for ``weights_only`` loading. Under DDP every rank's state is kept (``"ranks"``: they part
at the first step) and rank r gets state r back where the checkpoint has one, else rank 0's.
"""

from __future__ import annotations

import random

import numpy as np
import torch
import torch.distributed as dist
from lightning.pytorch import Callback


def collect_rng_state() -> dict:
    """Python, NumPy and torch (CPU and every CUDA device) generator states, weights_only-loadable."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss = random.getstate()
    state = {"torch": torch.get_rng_state(),
             "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
             "python": {"version": version, "internal": torch.tensor(internal, dtype=torch.int64),
                        "gauss": gauss}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    p = state["python"]
    random.setstate((p["version"], tuple(int(x) for x in p["internal"].tolist()), p["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class RNGStateCallback(Callback):
    """Saves the generators with each checkpoint; puts them back before the first batch after a resume."""

    def __init__(self):
        self._pending: dict | None = None

    def state_dict(self) -> dict:
        state = collect_rng_state()
        if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return state
        ranks: list = [None] * dist.get_world_size()
        dist.all_gather_object(ranks, state)  # collective: every rank assembles the checkpoint (rank 0 writes it)
        return {**state, "ranks": ranks}  # the top level stays rank 0's: a reader of the old layout still works

    def load_state_dict(self, state_dict: dict) -> None:
        self._pending = state_dict or None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._pending is not None:
            ranks = self._pending.get("ranks") or []
            rank = trainer.global_rank
            set_rng_state(ranks[rank] if rank < len(ranks) else self._pending)
            self._pending = None
