"""What a run changes in its process, put back afterwards: ``sl.train`` twice in one notebook, or inside a caller's app.

Put back: Hydra's singletons, loggers (the run's own handlers closed), environment variables, the working directory,
warning filters, signal handlers, torch's threads and matmul precision, the random streams; a process group the run
started is destroyed.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import signal
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobRuntime
from hydra.initialize import get_gh_backup, restore_gh_from_backup
from hydra.version import VersionBase

from sts_lightning.embeddings.isolated_rng import isolated_rng
from sts_lightning.runs.compat import hydra_singletons

_RUNTIME = (JobRuntime, HydraConfig, VersionBase)  # Hydra's singletons besides GlobalHydra that a run changes


@contextmanager
def fresh_hydra() -> Iterator[None]:
    """Hydra with no app initialised inside the block; the caller's app and singletons restored after it."""
    backup, instances = get_gh_backup(), hydra_singletons()
    kept = {kind: (obj, copy.deepcopy(vars(obj))) for kind in _RUNTIME if (obj := instances.get(kind))}
    GlobalHydra.instance().clear()
    try:
        yield
    finally:
        restore_gh_from_backup(backup)
        for kind in _RUNTIME:
            instances.pop(kind, None)
        for kind, (obj, state) in kept.items():
            vars(obj).clear()
            vars(obj).update(state)
            instances[kind] = obj


def _loggers() -> list[logging.Logger]:
    return [logging.getLogger(), *(x for x in list(logging.Logger.manager.loggerDict.values())
                                   if isinstance(x, logging.Logger))]


@contextmanager
def _kept_logging() -> Iterator[None]:
    saved = {lg: (lg.level, list(lg.handlers), lg.propagate, lg.disabled, list(lg.filters)) for lg in _loggers()}
    before = {id(h) for state in saved.values() for h in state[1]}
    try:
        yield
    finally:
        added = {id(h): h for lg in _loggers() for h in lg.handlers if id(h) not in before}
        for lg, (level, handlers, propagate, disabled, filters) in saved.items():
            lg.setLevel(level)
            lg.handlers[:] = handlers
            lg.propagate, lg.disabled = propagate, disabled
            lg.filters[:] = filters
        for handler in added.values():  # the run's train.log and console handlers
            with contextlib.suppress(Exception):
                handler.flush()
                handler.close()


@contextmanager
def _kept_environment() -> Iterator[None]:
    saved, cwd = dict(os.environ), os.getcwd()
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        os.chdir(cwd)


@contextmanager
def _kept_signals() -> Iterator[None]:
    main = threading.current_thread() is threading.main_thread()  # only the main thread may set handlers
    saved = {s: signal.getsignal(s) for s in signal.valid_signals()} if main else {}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)


@contextmanager
def _kept_torch() -> Iterator[None]:
    import torch
    import torch.distributed as dist

    threads, matmul = torch.get_num_threads(), torch.get_float32_matmul_precision()
    had_group = dist.is_available() and dist.is_initialized()
    try:
        with isolated_rng():
            yield
    finally:
        if dist.is_available() and dist.is_initialized() and not had_group:
            dist.destroy_process_group()
        torch.set_num_threads(threads)
        torch.set_float32_matmul_precision(matmul)


@contextmanager
def kept_process_state() -> Iterator[None]:
    """Run the block (one training run) and put back everything the module docstring lists."""
    with _kept_signals(), _kept_environment(), _kept_logging(), warnings.catch_warnings(), _kept_torch(), \
            fresh_hydra():
        yield
