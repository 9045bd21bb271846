"""Every training DataModule resumes mid-epoch from one base (``datamodules.loader.ResumableDataModule``).

Checked: each class a ``configs/data/*.yaml`` names derives from the base (or declares ``resumable = False``
with its reason); for the cross-view AE's source views and Latte-Mix's token states, a loader restored from
the state saved after ``k`` batches yields exactly the batches an uninterrupted loader yields from ``k`` on,
the next epoch is whole again (workers kept alive across epochs too), and a real Trainer killed mid-epoch
and resumed from ``last.ckpt`` trains on the same batches as an uninterrupted one. NLI, sentences and
distillation are compared end to end in ``tests/runs/test_resume.py``, ``tests/datamodules/test_nli.py`` and ``test_sentence_stream.py``.
Also here: the global batch size must divide by the world size.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint

from sts_lightning.datamodules.loader import ResumableDataModule, per_device_batch_size
from sts_lightning.datamodules.nli import NLIDataModule
from sts_lightning.datamodules.source_views import SourceViewsDataModule
from sts_lightning.datamodules.token_states import TokenStateDataModule
from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import SENTEVAL_PAIRS, Killed, compose_train, kill_at, write_senteval
from tests.paths import CONFIG_DIR

DATA_CONFIGS = sorted((CONFIG_DIR / "data").glob("*.yaml"))


def _target(config: Path) -> type:
    module, _, name = str(compose_train([f"data={config.stem}"]).data._target_).rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_data_config_is_found():
    assert {p.stem for p in DATA_CONFIGS} >= {"nli", "sentences", "distillation", "cached_embeddings",
                                               "source_views", "token_states"}


@pytest.mark.parametrize("config", DATA_CONFIGS, ids=lambda p: p.stem)
def test_every_datamodule_is_resumable_or_says_why_not(config):
    cls = _target(config)
    if getattr(cls, "resumable", None) is False:
        assert len(str(getattr(cls, "resume_note", "")).strip()) > 20, f"{cls.__name__}: resumable=False needs a reason"
        return
    assert issubclass(cls, ResumableDataModule), f"{cls.__qualname__} ({config.name}) is not a ResumableDataModule"
    assert cls.resumable is True and cls.resume_note
    assert cls.train_dataloader is not ResumableDataModule.train_dataloader


# ------------------------------------------------------------------------------------- tiny DataModules
def _source_views(model_dir: Path, data_dir: Path, cache: Path, **kwargs) -> SourceViewsDataModule:
    sources = [str(model_dir), {"model": str(model_dir), "pooling": "cls"}]
    return SourceViewsDataModule(sources, str(data_dir), files=["wiki/wiki_sentences_100k.txt"], batch_size=4,
                                 cache_dir=str(cache), seed=3, **kwargs)


def _token_states(model_dir: Path, data_dir: Path, cache: Path, **kwargs) -> TokenStateDataModule:
    return TokenStateDataModule(str(data_dir), files=["nli:snli:dev", "wiki/wiki_sentences_100k.txt"],
                                model_name_or_path=str(model_dir), max_length=16, batch_size=4,
                                cache_dir=str(cache), seed=3, encode_device="cpu", **kwargs)


MAKERS = {"source_views": _source_views, "token_states": _token_states}


@pytest.fixture(scope="module")
def make(tiny_model_dir, train_data_dir, tmp_path_factory):  # noqa: F811
    """``make(name, **kwargs)``: a set-up DataModule; the caches are encoded once for the module."""
    cache = tmp_path_factory.mktemp("resumable_cache")

    def build(name: str, **kwargs) -> ResumableDataModule:
        dm = MAKERS[name](tiny_model_dir, train_data_dir, cache, **kwargs)
        dm.prepare_data()
        dm.setup("fit")
        return dm

    return build


def _key(batch) -> tuple:
    """A batch (list of tensors, or dict of tensors) as comparable bytes."""
    tensors = batch.values() if isinstance(batch, dict) else batch
    return tuple(t.numpy().tobytes() for t in tensors)


def _trainer_at(epoch: int, batches_done: int = 0, num_batches: int = 0) -> SimpleNamespace:
    """What ``trainer_epoch`` / ``trainer_position`` read of a Trainer during epoch ``epoch``."""
    progress = SimpleNamespace(current=SimpleNamespace(processed=epoch, ready=epoch + 1))
    batches = SimpleNamespace(current=SimpleNamespace(processed=batches_done))
    loop = SimpleNamespace(epoch_progress=progress, epoch_loop=SimpleNamespace(batch_progress=batches))
    return SimpleNamespace(fit_loop=loop, world_size=1, global_rank=0, current_epoch=epoch,
                           num_training_batches=num_batches)


@pytest.mark.parametrize("num_workers", [0, 1])
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_restored_loader_continues_the_uninterrupted_epoch(make, name, num_workers):
    """State after ``k`` batches of epoch 1 -> a fresh DataModule's loader yields batches ``k..`` of that
    epoch, then the whole of epoch 2 (the same loader, as Lightning keeps it; with a worker kept alive)."""
    full = make(name)
    loader = full.train_dataloader()
    epochs = {}
    for epoch in range(4):
        full.trainer = _trainer_at(epoch)
        epochs[epoch] = [_key(b) for b in loader]
    n = len(epochs[1])
    assert n == len(loader) >= 8 and all(len(e) == n for e in epochs.values())
    in_file_order = [_key(b) for b in make(name, shuffle=False).train_dataloader()]
    assert len({tuple(e) for e in (*epochs.values(), in_file_order)}) == 5  # shuffled, anew each epoch

    for k in (1, 5, n - 1, n):
        full.trainer = _trainer_at(1, k, n)
        state = full.state_dict()
        assert state == ({"epoch": 1, "batches_done": k} if k < n else {"epoch": 2, "batches_done": 0})
        resumed = make(name, num_workers=num_workers)
        resumed.load_state_dict(state)
        resumed_loader = resumed.train_dataloader()
        resumed.trainer = _trainer_at(state["epoch"])
        rest = [_key(b) for b in resumed_loader]
        assert rest == (epochs[1][k:] if k < n else epochs[2]), k
        assert len(resumed_loader) == n  # the skip is for one iterator only
        resumed.trainer = _trainer_at(state["epoch"] + 1)
        assert [_key(b) for b in resumed_loader] == epochs[state["epoch"] + 1], k


# ------------------------------------------------------------------------------------- a real Trainer
class Recorder(LightningModule):
    """Records every training batch (one trivial parameter, so the optimizer has something to step)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.seen: list[tuple] = []

    def training_step(self, batch, batch_idx):
        self.seen.append(_key(batch))
        return (self.w - 1).pow(2).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(dm: ResumableDataModule, out: Path, callbacks=(), ckpt_path: str | None = None) -> Recorder:
    module = Recorder()
    checkpoint = ModelCheckpoint(dirpath=out, save_last=True, save_top_k=0, every_n_train_steps=1)
    trainer = Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, num_sanity_val_steps=0, callbacks=[checkpoint, *callbacks],
                      default_root_dir=out)
    trainer.fit(module, datamodule=dm, ckpt_path=ckpt_path)
    return module


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_trainer_killed_mid_epoch_resumes_with_the_same_batches(make, name, tmp_path):
    """Kill before optimizer step ``n + 3`` (epoch 1, batch 3), resume from ``last.ckpt``: the batches of
    the killed and the resumed run together are those of the uninterrupted run, in order."""
    uninterrupted = _fit(make(name), tmp_path / "a").seen
    n = len(uninterrupted) // 2
    with pytest.raises(Killed):
        _fit(make(name), tmp_path / "b", [kill_at(n + 3)])
    resumed = _fit(make(name), tmp_path / "b", ckpt_path=str(tmp_path / "b" / "last.ckpt")).seen
    assert len(resumed) == n - 3
    assert resumed == uninterrupted[n + 3:]


def test_global_batch_must_divide_by_world_size(tmp_path):
    assert per_device_batch_size(12, 3) == 4
    write_senteval(tmp_path, "dev", SENTEVAL_PAIRS)
    dm = NLIDataModule(str(tmp_path), ["snli:dev"], batch_size=10)
    dm.trainer = SimpleNamespace(world_size=3)
    with pytest.raises(ConfigError, match="batch_size=10"):
        dm.setup("fit")
