"""The private attributes of torch and Lightning that we reach through an object, in one place.

This module sits below every layer (tests/layering.py), so it imports neither Lightning nor Hydra: each private part
is reached through the object a caller hands in; private names that must be imported are in ``runs/compat.py``.
tests/embeddings/test_compat.py fails by name when an installed version lacks one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

LIGHTNING_OBSERVER = "child-process-observer"  # the thread name of Lightning's _ChildProcessObserver


def own_parameters(module) -> dict:
    """torch's ``Module._parameters``: a module's own parameter slots, re-pointed to tie two models' weights."""
    return module._parameters


def unscale_before_step(optimizer) -> None:
    """A GradScaler unscales the gradients before ``optimizer.step`` (torch's ``_step_supports_amp_scaling`` off)."""
    optimizer._step_supports_amp_scaling = False


def set_sampler_epoch(loader, epoch: int) -> None:
    """``set_epoch`` on a loader's sampler and its batch sampler's sampler, once each (as Lightning's private
    ``_set_sampler_epoch``, which embeddings/ and datamodules/ may not import from ``runs/compat.py``)."""
    samplers = {id(s): s for s in (getattr(loader, "sampler", None),
                                   getattr(getattr(loader, "batch_sampler", None), "sampler", None)) if s is not None}
    for sampler in samplers.values():
        if callable(getattr(sampler, "set_epoch", None)):
            sampler.set_epoch(epoch)


class IndexSamplerHook:
    """Before torch's ``DataLoader``: the batch sampler its iterators read (the private ``_index_sampler``) is
    ``self.index_sampler(torch's)``."""

    @property
    def _index_sampler(self):
        return self.index_sampler(super()._index_sampler)


def index_sampler(loader):
    """The batch sampler ``loader``'s next iterator reads (torch's ``DataLoader._index_sampler``)."""
    return loader._index_sampler


def after_lightning_signal_handlers(trainer, install: Callable[[], None]) -> None:
    """Call ``install`` each time Lightning has registered its signal handlers (``trainer._signal_connector``,
    after the ``setup`` hooks), so ours replace its; wrapped once per trainer."""
    connector = getattr(trainer, "_signal_connector", None)
    if connector is None or getattr(connector, "_preemption_wrapped", False):
        return
    register = connector.register_signal_handlers

    def register_then_ours() -> None:
        register()
        install()

    connector.register_signal_handlers = register_then_ours
    connector._preemption_wrapped = True


def quiet_lightning_observer() -> None:
    """End Lightning's launcher watcher at its next wake-up, touching no process: it SIGKILLs every rank once one
    child exited non-zero, as every rank of a preempted run does (75), a moment apart."""
    for thread in threading.enumerate():
        if thread.name == LIGHTNING_OBSERVER and hasattr(thread, "_run"):
            thread._run = lambda: True


def attached_trainer(module):
    """The trainer a LightningModule is attached to, or None (its private ``_trainer``: ``.trainer`` raises)."""
    return getattr(module, "_trainer", None)


def started_experiment(logger):
    """A Lightning logger's experiment if it has started (its private ``_experiment``), else None: asking for
    ``logger.experiment`` would start one."""
    return getattr(logger, "_experiment", None)


def cluster_environment(trainer):
    """The trainer's cluster environment (SLURM, torchelastic...): the strategy's, else the accelerator
    connector's (``trainer._accelerator_connector``: a one-device strategy holds none)."""
    return getattr(trainer.strategy, "cluster_environment", None) or getattr(
        getattr(trainer, "_accelerator_connector", None), "cluster_environment", None)
