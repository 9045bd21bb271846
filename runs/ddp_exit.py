"""Leave the process group before Python's own teardown, so a finished multi-rank run exits 0 instead of aborting.

Why: torch 2.13's gloo backend destroys a finished collective's work object on its own worker thread
(``pt_gloo_runloop``) just after the caller was told the collective completed. When that work held tensors made
in Python (``broadcast_object_list``, the export's stop agreement in ``runs.stopping``), releasing them takes the
GIL; if the main thread has meanwhile returned and the interpreter is finalizing, Python ends that thread with
``pthread_exit`` inside a ``noexcept`` destructor and the process aborts ("terminate called without an active
exception", exit -6) after a run that trained and exported. Reproduced without our code: two gloo ranks doing one
``broadcast_object_list`` and returning aborted 3 times in 20 on 2 cores; with the group destroyed before the
return, 0 in 40. Lightning destroys the group at exit for NCCL only (``lightning.fabric.utilities.distributed``).

``destroy_process_group`` drops torch's own references; the worker threads are joined when the last reference
goes, so the exit handler first collects the garbage cycles that still hold the trainer and the DDP wrapper.
Only after a ``train()`` that ended cleanly: with a collective still queued (a lost peer) the group's destructor
would wait for it, up to the collective timeout.
"""

from __future__ import annotations

import atexit
import gc

import torch.distributed as dist

_clean = False  # the last train() in this process ended without an error: no collective is left queued
_registered = False


def group_in_use() -> None:
    """A ``train()`` starts: until it ends cleanly, the exit handler leaves the group alone."""
    global _clean
    _clean = False


def release_group_at_exit() -> None:
    """A ``train()`` ended cleanly on this rank: destroy the process group when the process exits."""
    global _clean, _registered
    if not (dist.is_available() and dist.is_initialized()):
        return
    _clean = True
    if not _registered:
        atexit.register(release_group)
        _registered = True


def release_group() -> None:
    """Destroy the default process group and join its worker threads (a no-op unless the last run ended cleanly)."""
    if _clean and dist.is_available() and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()
