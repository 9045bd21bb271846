"""Multi-source mixtures and the no-duplicates rule (``datamodules.mixture``), with sentence-transformers as the oracle.

sentence-transformers' own samplers (``NoDuplicatesBatchSampler``, ``ProportionalBatchSampler``,
``RoundRobinBatchSampler``) run on the same tiny datasets, seeded as ours (``seed * 100_003``, as
``EpochShuffleSampler`` seeds an epoch): the batches are the same, up to the length both advertise (what
sentence-transformers yields beyond it, we count as not served). Its default children (``RandomSampler``) draw from
one shared generator in an interleaved order we do not copy: there the rule's invariants are compared instead.
Also: resume mid-epoch (a real Trainer killed and resumed from ``last.ckpt``), two ranks, Lightning's DDP re-instantiation, the setup line and every bad value.
"""

from __future__ import annotations

import logging
import random
from collections import Counter

import pytest
import torch
from datasets import Dataset
from lightning.fabric.utilities.data import _replace_dunder_methods
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities.data import _update_dataloader
from omegaconf import OmegaConf
from sentence_transformers.base.sampler import (
    DefaultBatchSampler,
    NoDuplicatesBatchSampler,
    ProportionalBatchSampler,
    RoundRobinBatchSampler,
)
from torch.utils.data import BatchSampler, ConcatDataset, DataLoader, DistributedSampler, RandomSampler

from sts_lightning.datamodules.mixture import MixtureBatchSampler, row_texts
from sts_lightning.datamodules.nli import NLIDataModule
from sts_lightning.datamodules.scored_pairs import ScoredPairsDataModule
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.runs.config_checks import check_config
from tests.helpers import Killed, anchor_recorder, kill_at

SEED, BATCH = 3, 8
_rnd = random.Random(0)


def _rows(tag: str, n: int, vocab: int) -> list[tuple[str, str, str]]:
    """Triplets whose anchors and negatives repeat (``vocab`` distinct ones): the no-duplicates rule has work."""
    return [(f"{tag}{_rnd.randrange(vocab)}", f"{tag} positive {i}", f"{tag}{_rnd.randrange(vocab)}") for i in range(n)]


A, B = _rows("a", 53, 20), _rows("b", 31, 12)
DISTINCT_A, DISTINCT_B = ([(f"{t}{i}", f"{t}p{i}", f"{t}n{i}") for i in range(n)] for t, n in (("a", 29), ("b", 21)))


def _hf(rows) -> Dataset:
    return Dataset.from_dict({"anchor": [r[0] for r in rows], "positive": [r[1] for r in rows],
                              "negative": [r[2] for r in rows]})


def _ours(parts, rule=None, no_duplicates=True, epoch=0, **kwargs) -> MixtureBatchSampler:
    rows = [r for p in parts for r in p]
    sampler = MixtureBatchSampler(sizes=[len(p) for p in parts], batch_size=kwargs.pop("batch_size", BATCH), rule=rule,
                                  texts=row_texts(rows) if no_duplicates else None, seed=SEED, **kwargs)
    sampler.set_epoch(epoch)
    return sampler


def _theirs(parts, rule=None, drop_last=False, epoch=0, child=NoDuplicatesBatchSampler):
    generator = torch.Generator()
    kids = [child(_hf(p), BATCH, drop_last, generator=generator, seed=SEED * 100_003) for p in parts]
    if rule is None:
        sampler = kids[0]
    else:
        cls = {"proportional": ProportionalBatchSampler, "round_robin": RoundRobinBatchSampler}[rule]
        sampler = cls(ConcatDataset([_hf(p) for p in parts]), kids, generator=generator, seed=SEED * 100_003)
    sampler.set_epoch(epoch)
    return sampler


def _no_repeat(rows, batch) -> bool:
    texts = [t for i in batch for t in set(rows[i])]
    return len(texts) == len(set(texts))


@pytest.mark.parametrize("epoch", [0, 1])
@pytest.mark.parametrize("drop_last", [False, True])
def test_no_duplicates_alone_is_sentence_transformers_batches(epoch, drop_last):
    ours, theirs = _ours([A], drop_last=drop_last, epoch=epoch), _theirs([A], drop_last=drop_last, epoch=epoch)
    got, want = list(ours), list(theirs)
    assert len(ours) == len(theirs) == len(got) and got == want[:len(got)]
    assert all(_no_repeat(A, b) for b in got)
    if not drop_last:  # what it serves beyond its length are the rows we count as not served
        assert ours.epoch_stats(epoch)["unserved"] == sum(len(b) for b in want[len(got):]) > 0


@pytest.mark.parametrize("epoch", [0, 1])
@pytest.mark.parametrize("rule", ["proportional", "round_robin"])
def test_mixtures_with_no_duplicates_are_sentence_transformers_batches(rule, epoch):
    ours, theirs = _ours([A, B], rule, epoch=epoch), _theirs([A, B], rule, epoch=epoch)
    got, want = list(ours), list(theirs)
    assert len(ours) == len(theirs) == len(got) and got == want[:len(got)]
    rows = A + B
    assert all(_no_repeat(rows, b) for b in got)
    assert all(max(b) < len(A) or min(b) >= len(A) for b in got)  # one source a batch


@pytest.mark.parametrize("rule", ["proportional", "round_robin"])
def test_plain_mixture_is_the_shuffle_cut_into_one_source_batches(rule):
    """Without the rule, on rows with no shared text, sentence-transformers' no-duplicates sampler is a plain
    shuffled batcher: ours (no_duplicates off) gives its batches."""
    parts = [DISTINCT_A, DISTINCT_B]
    assert list(_ours(parts, rule, no_duplicates=False)) == list(_theirs(parts, rule))


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("rule", ["proportional", "round_robin"])
def test_plain_mixture_keeps_the_rule_of_sentence_transformers_default_children(rule, drop_last):
    parts = [DISTINCT_A, DISTINCT_B]
    ours = list(_ours(parts, rule, no_duplicates=False, drop_last=drop_last))
    children = lambda ds, bs, dl, generator, seed: DefaultBatchSampler(  # noqa: E731
        RandomSampler(ds, generator=generator), batch_size=bs, drop_last=dl, generator=generator, seed=seed)
    theirs = list(_theirs(parts, rule, drop_last=drop_last, child=children))

    def source(batch):
        assert max(batch) < len(DISTINCT_A) or min(batch) >= len(DISTINCT_A)  # one source a batch
        return min(batch) >= len(DISTINCT_A)

    assert Counter(map(source, ours)) == Counter(map(source, theirs))
    assert sorted(map(len, ours)) == sorted(map(len, theirs))
    served = [sorted(i for b in batches for i in b) for batches in (ours, theirs)]
    assert all(len(s) == len(set(s)) for s in served)  # no row twice an epoch
    if rule == "proportional" and not drop_last:  # every row once
        assert served[0] == served[1] == list(range(len(DISTINCT_A) + len(DISTINCT_B)))


def test_weights_share_the_batches_and_read_a_small_source_again():
    sampler = _ours([DISTINCT_A, DISTINCT_B], "proportional", no_duplicates=False, weights=[1, 3])
    batches = list(sampler)
    from_b = sum(min(b) >= len(DISTINCT_A) for b in batches)
    assert len(batches) == len(sampler) == 4 + 3 and from_b == 5  # 7 batches, 3/4 of them from B (3 batches full)
    b_rows = Counter(i for b in batches if min(b) >= len(DISTINCT_A) for i in b)
    assert set(b_rows) == set(range(len(DISTINCT_A), len(DISTINCT_A) + len(DISTINCT_B))) and max(b_rows.values()) == 2


def test_two_ranks_take_disjoint_slices_of_the_same_global_batches():
    one = list(_ours([A, B], "proportional"))
    ranks = [list(_ours([A, B], "proportional", world_size=2, rank=r)) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == len(one)
    for whole, r0, r1 in zip(one, *ranks, strict=True):
        assert len(r0) == len(r1)
        if len(whole) == BATCH:
            assert r0 + r1 == whole and not set(r0) & set(r1)
        else:  # a short batch, padded with its own rows
            assert set(r0 + r1) == set(whole) and len(r0) == -(-len(whole) // 2)


def _triplet_files(tmp_path) -> list[str]:
    paths = []
    for name, rows in (("a", A), ("b", B)):
        path = tmp_path / f"{name}.tsv"
        path.write_text("anchor\tpositive\tnegative\n" + "".join("\t".join(r) + "\n" for r in rows))
        paths.append(str(path))
    return paths


def _datamodule(tmp_path, **kwargs) -> NLIDataModule:
    options = {"batch_size": BATCH, "seed": SEED, "format": "triplets", "mixture": "proportional",
               "no_duplicates": True, **kwargs}
    dm = NLIDataModule(str(tmp_path), _triplet_files(tmp_path), **options)
    dm.setup("fit")
    return dm


def test_datamodule_resumes_mid_epoch_and_logs_its_mixture(tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        dm = _datamodule(tmp_path)
    line = next(r.message for r in caplog.records if r.message.startswith("training batches"))
    stats = _ours([A, B], "proportional").epoch_stats(0)
    assert "a.tsv 53 rows 63.6% of batches" in line and "b.tsv 31 rows 36.4% of batches" in line
    assert f"{stats['deferred']} rows deferred, {stats['unserved']} rows not served" in line

    def anchors(module):
        return [tuple(b["anchors"]) for b in module.train_dataloader()]

    epochs = []
    for epoch in (0, 1):
        dm.load_state_dict({"epoch": epoch, "batches_done": 0})
        epochs.append(anchors(dm))
    assert epochs[0] != epochs[1] and epochs[0] == [tuple(A[i][0] if i < len(A) else B[i - len(A)][0] for i in b)
                                                    for b in _ours([A, B], "proportional")]
    resumed = _datamodule(tmp_path)
    resumed.load_state_dict({"epoch": 1, "batches_done": 4})
    assert anchors(resumed) == epochs[1][4:]


@pytest.mark.parametrize(("options", "message"), [
    ({"mixture": "mixed"}, "unknown data.mixture 'mixed'"),
    ({"mixture_weights": [1, 2]}, "data.mixture_weights applies to data.mixture=proportional only"),
    ({"mixture": "round_robin", "mixture_weights": [1, 2]}, "applies to data.mixture=proportional only"),
    ({"mixture": "proportional", "mixture_weights": [1]}, "data.mixture_weights has 1 weight(s) for 2 data.sources"),
    ({"mixture": "proportional", "mixture_weights": [1, 0]}, r"data.mixture_weights[1]=0 is not allowed"),
    ({"mixture": "proportional", "mixture_weights": [-1, 2]}, r"data.mixture_weights[0]=-1 is not allowed"),
    ({"mixture": "proportional", "mixture_weights": [float("nan"), 2]}, r"data.mixture_weights[0]=nan"),
    ({"mixture": "proportional", "mixture_weights": ["1", 2]}, r"data.mixture_weights[0]='1'"),
    ({"no_duplicates": "yes"}, "data.no_duplicates='yes' is not allowed"),
    ({"sources": ["snli:dev"], "mixture": "proportional"}, "mixes two or more data.sources, but there is one"),
])
def test_bad_values_are_one_line_naming_the_key_before_anything_loads(options, message):
    sources = options.pop("sources", ["snli:dev", "snli:test"])
    for cls in (NLIDataModule, ScoredPairsDataModule):
        with pytest.raises(ConfigError) as err:
            cls("/nowhere", ["stsb:train", "stsb:dev"] if cls is ScoredPairsDataModule and len(sources) > 1
                else ["stsb:train"] if cls is ScoredPairsDataModule else sources, **options)
        assert message in str(err.value) and "\n" not in str(err.value)
    cfg = OmegaConf.create({"data": {"sources": sources, "batch_size": 8, **options}})
    with pytest.raises(ConfigError, match="data."):
        check_config(cfg)


def test_lightning_hands_its_distributed_sampler_in_and_keeps_ours(tmp_path):
    """Under DDP Lightning rebuilds the training loader with its ``DistributedSampler``: ours reads the rank from it."""
    dm = _datamodule(tmp_path, mixture="round_robin")
    with _replace_dunder_methods(DataLoader, "dataset"), _replace_dunder_methods(BatchSampler):  # as Lightning calls it
        loader = dm.train_dataloader()
    rank1 = _update_dataloader(loader, DistributedSampler(dm.dataset, num_replicas=2, rank=1),
                               mode=RunningStage.TRAINING)
    assert isinstance(rank1.batch_sampler, MixtureBatchSampler) and rank1.batch_sampler.rank == 1
    rows = A + B
    want = [[rows[i][0] for i in b] for b in _ours([A, B], "round_robin", world_size=2, rank=1)]
    assert [b["anchors"] for b in rank1] == want and len(rank1) == len(loader)


def test_a_source_smaller_than_one_batch_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"data.batch_size=40 is larger than source .*b.tsv \(31 rows\)"):
        _datamodule(tmp_path, batch_size=40)


def _fit(dm, out, callbacks=(), ckpt_path=None) -> list[list[str]]:
    module = anchor_recorder()
    checkpoint = ModelCheckpoint(dirpath=out, save_last=True, save_top_k=0, every_n_train_steps=1)
    Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
            enable_model_summary=False, num_sanity_val_steps=0, callbacks=[checkpoint, *callbacks],
            default_root_dir=out).fit(module, datamodule=dm, ckpt_path=ckpt_path)
    return module.seen


def test_trainer_killed_mid_epoch_resumes_with_the_same_batches(tmp_path):
    """Killed before step ``n + 3`` (epoch 1), resumed from ``last.ckpt``: the rest of the uninterrupted run."""
    uninterrupted = _fit(_datamodule(tmp_path), tmp_path / "a")
    n = len(uninterrupted) // 2
    with pytest.raises(Killed):
        _fit(_datamodule(tmp_path), tmp_path / "b", [kill_at(n + 3)])
    resumed = _fit(_datamodule(tmp_path), tmp_path / "b", ckpt_path=str(tmp_path / "b" / "last.ckpt"))
    assert uninterrupted[:n] != uninterrupted[n:] and resumed == uninterrupted[n + 3:]
