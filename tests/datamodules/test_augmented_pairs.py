"""AugSBERT's silver pairs (``datamodules.augmented_pairs``, ``datamodules.pair_sampling``): sampling never yields a
self, gold or repeated pair and is seeded; ``semantic`` equals the authors' sentence-transformers example; the labels
come from the cross-encoder (a word-overlap fake here: the tests must not need a trained one), are cached and read back
without a model; batches are ``data=scored_pairs``'s; bad options fail in one line."""

from __future__ import annotations

import logging
import signal

import pytest
import torch
from sentence_transformers import util

from sts_lightning.datamodules import augmented_pairs
from sts_lightning.datamodules.augmented_pairs import AugmentedPairsDataModule
from sts_lightning.datamodules.pair_sampling import (
    gold_pair_keys,
    new_pairs,
    pair_key,
    random_partners,
    semantic_partners,
    unique_sentences,
)
from sts_lightning.embeddings import stop_request
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.stop_request import StopRequested


class JaccardLabeller:
    """Word-overlap scores in [0, 1], counting its loads and calls (the cache test needs them)."""

    loads = 0
    calls = 0

    def __init__(self, path, batch_size, device, shift=0.0):
        type(self).loads += 1
        self.path, self.batch_size, self.device, self.shift = path, batch_size, device, shift

    def score_pairs(self, sentences1, sentences2):
        type(self).calls += 1
        return torch.tensor([self.shift + jaccard(a, b) for a, b in zip(sentences1, sentences2, strict=True)])


def jaccard(a: str, b: str) -> float:
    x, y = set(a.split()), set(b.split())
    return len(x & y) / len(x | y)


def silver_rows(dm: AugmentedPairsDataModule) -> list[tuple[str, str]]:
    return list(zip(dm.silver.sentences1, dm.silver.sentences2, strict=True))


@pytest.fixture()
def labeller(monkeypatch):
    JaccardLabeller.loads = JaccardLabeller.calls = 0
    monkeypatch.setattr(augmented_pairs, "_load_labeller", JaccardLabeller)
    return JaccardLabeller


@pytest.fixture()
def make(tiny_data_dir, tmp_path):
    """``make(**options)``: a DataModule over the tiny STS-B train split (4 gold pairs, 8 sentences), its own cache."""
    (tmp_path / "ce").mkdir()
    (tmp_path / "ce" / "model.safetensors").write_bytes(b"weights")

    def build(**options) -> AugmentedPairsDataModule:
        defaults = {"cross_encoder": str(tmp_path / "ce"), "strategy": "random", "batch_size": 4,
                    "cache_dir": str(tmp_path / "cache"), "encode_device": "cpu"}
        return AugmentedPairsDataModule(str(tiny_data_dir), **{**defaults, **options})

    return build


# ------------------------------------------------------------------------------------------------ sampling
def test_random_partners_are_distinct_others_and_seeded():
    for n, k in [(12, 3), (200, 3), (5, 4), (4, 9)]:  # rejection draws, per-row permutations, fewer others than k
        partners = random_partners(n, k, seed=7)
        assert partners.shape == (n, min(k, n - 1))
        for i, row in enumerate(partners.tolist()):
            assert i not in row and len(set(row)) == len(row) and all(0 <= j < n for j in row)
        assert (random_partners(n, k, seed=7) == partners).all()
    assert (random_partners(200, 3, seed=8) != random_partners(200, 3, seed=7)).any()
    assert random_partners(1, 3, seed=0).shape == (1, 0)


def test_new_pairs_drop_self_gold_and_repeats_in_either_order():
    gold = {pair_key(1, 0)}
    partners = [[0, 1, 2], [0, 2], [1, 0], [2]]  # a self pair, gold 0-1 both ways, 1-2 and 0-2 again from 2
    assert new_pairs(partners, gold) == [(0, 2), (1, 2), (3, 2)]
    assert gold == {(0, 1)}  # the caller's set is left alone


def test_random_silver_pairs_are_never_gold_self_or_repeated():
    s1 = [f"sentence {i} a" for i in range(10)]
    s2 = [f"sentence {i} b" for i in range(10)]
    sentences = unique_sentences([*s1, s2[0]], [*s2, s1[0]])  # a gold pair given in both orders
    assert len(sentences) == 20 and sentences[:2] == ["sentence 0 a", "sentence 0 b"]
    gold = gold_pair_keys(s1, s2, sentences)
    pairs = new_pairs(random_partners(len(sentences), 3, seed=1), gold)
    keys = [pair_key(i, j) for i, j in pairs]
    assert pairs and len(keys) == len(set(keys)) and not set(keys) & gold and all(i != j for i, j in pairs)
    assert len(pairs) <= 3 * len(sentences)


def example_semantic_pairs(sentences, gold_pairs, embeddings, top_k):
    """The authors' ``train_sts_indomain_semantic.py`` logic, re-stated: the gold pairs in both orders are the
    duplicates; each sentence's ``top_k + 1`` semantic_search hits, itself and pairs already present skipped."""
    sent2idx = {s: i for i, s in enumerate(sentences)}
    duplicates = {(sent2idx[a], sent2idx[b]) for a, b in gold_pairs} | {(sent2idx[b], sent2idx[a]) for a, b in gold_pairs}
    silver = []
    for idx, hits in enumerate(util.semantic_search(embeddings, embeddings, top_k=top_k + 1)):
        for hit in hits:
            iid = hit["corpus_id"]
            if iid != idx and (iid, idx) not in duplicates:
                silver.append((sentences[idx], sentences[iid]))
                duplicates.add((idx, iid))
    return silver


def test_semantic_sampling_equals_the_authors_example():
    # 12 sentences in four clusters of three (a direction each, small distinct offsets: no ties)
    axes = torch.eye(4)
    offsets = torch.tensor([[0.0, 0.1, 0.2, 0.0], [0.2, 0.0, 0.0, 0.3], [0.1, 0.3, 0.0, 0.1]])
    vectors = torch.stack([axes[c] + offsets[m].roll(c) * (1 + c / 10) for c in range(4) for m in range(3)])
    sentences = [f"s{i}" for i in range(12)]
    gold = [("s0", "s1"), ("s4", "s3"), ("s6", "s9"), ("s11", "s2")]
    s1, s2 = [a for a, _ in gold], [b for _, b in gold]
    for top_k in (1, 2, 3, 5):
        ours = new_pairs(semantic_partners(vectors, top_k, chunk=5), gold_pair_keys(s1, s2, sentences))
        assert [(sentences[i], sentences[j]) for i, j in ours] == example_semantic_pairs(sentences, gold, vectors, top_k)
        assert ("s0", "s1") not in [(sentences[i], sentences[j]) for i, j in ours]


# ------------------------------------------------------------------------------------ labelling and caching
def test_silver_pairs_labelled_cached_and_batched_as_scored_pairs(make, labeller, caplog):
    dm = make(top_k=3, label_batch_size=2, seed=4)
    with caplog.at_level(logging.INFO):
        dm.prepare_data()
        dm.setup("fit")
    assert labeller.loads == 1 and labeller.calls == 1  # 16 pairs per call (label_batch_size x 16)
    silver, gold = dm.silver, list(dm.parts.values())[0]
    assert 0 < len(silver) <= 8 * 3 and len(dm.dataset) == len(gold) + len(silver) == 4 + len(silver)
    assert silver.scores == pytest.approx([jaccard(a, b) for a, b in silver_rows(dm)])
    gold_keys = {frozenset(p) for p in zip(gold.sentences1, gold.sentences2, strict=True)}
    silver_keys = [frozenset(p) for p in silver_rows(dm)]
    assert not set(silver_keys) & gold_keys and len(set(silver_keys)) == len(silver_keys)
    assert f"AugSBERT: 4 gold pairs + {len(silver)} silver pairs (random, top_k=3) labelled by" in caplog.text
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) == {"sentences1", "sentences2", "scores"} and len(batch["sentences1"]) == 4
    assert batch["scores"].dtype == torch.float32 and 0 <= batch["scores"].min() <= batch["scores"].max() <= 1
    facts = dm.data_facts()
    assert facts.rows == len(dm.dataset) and facts.per_source == {"stsb:train": 4, "silver (random, top_k=3)": len(silver)}
    assert "cross-encoder" in facts.notes[-1]

    caplog.clear()
    again = make(top_k=3, label_batch_size=2, seed=4)
    with caplog.at_level(logging.INFO):
        again.prepare_data()
        again.setup("fit")
    assert labeller.loads == 1 and labeller.calls == 1 and "using cached silver pairs" in caplog.text
    assert again.silver.sentences1 == silver.sentences1 and again.silver.scores == silver.scores
    make(top_k=3, label_batch_size=2, seed=5).prepare_data()  # random: another seed, other pairs
    assert labeller.loads == 2


def test_new_cross_encoder_weights_or_top_k_relabel_and_silver_only(make, labeller, tmp_path, monkeypatch):
    monkeypatch.setattr(augmented_pairs, "LABEL_PART_BATCHES", 1)
    make(label_batch_size=3).prepare_data()
    assert labeller.loads == 1 and labeller.calls >= 3  # ceil(silver / 3) calls, each scored in place
    (tmp_path / "ce" / "model.safetensors").write_bytes(b"retrained weights")
    make(label_batch_size=3).prepare_data()
    assert labeller.loads == 2
    dm = make(top_k=1, silver_only=True)
    dm.prepare_data()
    dm.setup("fit")
    assert labeller.loads == 3 and len(dm.dataset) == len(dm.silver) <= 8
    assert dm.silver.scores == pytest.approx([jaccard(a, b) for a, b in silver_rows(dm)])
    assert list(dm.data_facts().per_source) == ["silver (random, top_k=1)"]


def test_semantic_sampling_with_a_bi_encoder(make, labeller, tiny_model_dir):
    dm = make(strategy="semantic", sampler=str(tiny_model_dir), top_k=2)
    dm.prepare_data()
    dm.setup("fit")
    gold = list(dm.parts.values())[0]
    sentences = unique_sentences(gold.sentences1, gold.sentences2)
    assert 0 < len(dm.silver) <= 2 * len(sentences) and labeller.loads == 1
    assert all(a != b and a in sentences and b in sentences for a, b in silver_rows(dm))


def test_bad_scores_and_setup_before_prepare_data_are_refused(make, labeller, monkeypatch):
    with pytest.raises(DataError, match="run prepare_data first"):
        make().setup("fit")
    monkeypatch.setattr(augmented_pairs, "_load_labeller", lambda *a: JaccardLabeller(*a, shift=1.0))
    with pytest.raises(DataError, match=r"outside \[0, 1\]"):
        make(top_k=2).prepare_data()


def test_a_stop_request_ends_prepare_data_before_a_model_loads(make, labeller):
    stop_request.request(signal.SIGTERM)
    with pytest.raises(StopRequested, match="AugSBERT cross-encoder"):
        make().prepare_data()
    assert labeller.loads == 0


def test_clear_errors_for_bad_options(make, tmp_path):
    with pytest.raises(ConfigError, match=r"^data.cross_encoder is required"):
        make(cross_encoder=None)
    with pytest.raises(ConfigError, match=r"data.cross_encoder='.*nowhere' is not a directory"):
        make(cross_encoder=str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"unknown data.strategy 'bm25'.*random, semantic"):
        make(strategy="bm25")
    with pytest.raises(ConfigError, match=r"data.top_k=0 is not allowed"):
        make(top_k=0)
    with pytest.raises(ConfigError, match="unknown scored-pair source"):
        make(sources=["snli:train"])
