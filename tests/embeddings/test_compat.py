"""``embeddings/compat.py``: each private attribute of torch and Lightning we reach is still there, as we use it.

A failing test names the private part an upgrade removed; pyproject.toml bounds the versions these passed with.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import lightning as L
import torch
from lightning.fabric.utilities.data import _set_sampler_epoch

from sts_lightning.embeddings import compat


def test_torch_still_has_module__parameters():
    layer = torch.nn.Linear(2, 2)
    slots = compat.own_parameters(layer)
    shared = torch.nn.Parameter(torch.zeros(2, 2))
    slots["weight"] = shared
    assert layer.weight is shared and list(slots) == ["weight", "bias"]


def test_torch_still_reads_optimizer__step_supports_amp_scaling():
    import torch.amp.grad_scaler as grad_scaler
    from lightning.fabric.plugins.precision import amp

    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])
    compat.unscale_before_step(optimizer)
    assert optimizer._step_supports_amp_scaling is False
    assert "_step_supports_amp_scaling" in open(grad_scaler.__file__).read()
    assert "_step_supports_amp_scaling" in open(amp.__file__).read()


def test_set_sampler_epoch_does_what_lightnings_private_one_does():
    class Sampler:
        def __init__(self):
            self.epochs = []

        def set_epoch(self, epoch):
            self.epochs.append(epoch)

    for make in (lambda s: SimpleNamespace(sampler=s, batch_sampler=SimpleNamespace(sampler=s)),
                 lambda s: SimpleNamespace(sampler=None, batch_sampler=SimpleNamespace(sampler=s))):
        ours, theirs = Sampler(), Sampler()
        compat.set_sampler_epoch(make(ours), 3)
        _set_sampler_epoch(make(theirs), 3)
        assert ours.epochs == theirs.epochs == [3]


def test_lightning_still_has__signal_connector_register_signal_handlers():
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    calls = []
    trainer._signal_connector.register_signal_handlers = lambda: calls.append("lightning")
    compat.after_lightning_signal_handlers(trainer, lambda: calls.append("ours"))
    compat.after_lightning_signal_handlers(trainer, lambda: calls.append("twice"))  # wrapped once
    trainer._signal_connector.register_signal_handlers()
    assert calls == ["lightning", "ours"]
    from lightning.pytorch.trainer.connectors.signal_connector import _SignalConnector

    assert callable(_SignalConnector.register_signal_handlers)


def test_lightning_still_names_its_child_process_observer_and_its__run():
    from lightning.fabric.strategies.launchers.subprocess_script import _ChildProcessObserver

    observer = _ChildProcessObserver(main_pid=0, child_processes=[])
    assert observer.name == compat.LIGHTNING_OBSERVER and callable(observer._run)
    done = threading.Event()
    stand_in = threading.Thread(name=compat.LIGHTNING_OBSERVER, target=done.wait)
    stand_in._run = lambda: False
    stand_in.start()
    try:
        compat.quiet_lightning_observer()
        assert stand_in._run() is True
    finally:
        done.set()
        stand_in.join()


def test_lightning_still_has_the_accelerator_connectors_cluster_environment():
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    assert compat.cluster_environment(trainer) is trainer._accelerator_connector.cluster_environment


def test_torch_dataloader_iterators_still_read__index_sampler():
    from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

    class Reversed(compat.IndexSamplerHook, DataLoader):
        def index_sampler(self, base):
            return list(reversed(list(base)))

    loader = Reversed(list(range(6)), batch_size=2)
    assert isinstance(DataLoader(list(range(6)), batch_size=2)._index_sampler, BatchSampler)
    assert [b.tolist() for b in loader] == [[4, 5], [2, 3], [0, 1]] and len(loader) == 3
    assert compat.index_sampler(DataLoader([1], sampler=SequentialSampler([1]), batch_size=None)) is not None


def test_lightning_module_still_has__trainer():
    module = L.LightningModule()
    assert compat.attached_trainer(module) is None
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    module.trainer = trainer
    assert compat.attached_trainer(module) is trainer


def test_lightning_loggers_still_have__experiment_unstarted_until_asked(tmp_path):
    from lightning.pytorch.loggers import CSVLogger, WandbLogger

    assert compat.started_experiment(WandbLogger(offline=True, save_dir=str(tmp_path))) is None
    logger = CSVLogger(str(tmp_path))
    assert compat.started_experiment(logger) is None
    assert compat.started_experiment(logger) is None and logger.experiment is compat.started_experiment(logger)
