"""The on-disk embedding cache (issue 38): a warm cache serves every reading with no forward pass and the same
numbers; other weights are another key; a damaged shard is removed with one warning and encoded again."""

from __future__ import annotations

import logging

import pytest
import torch

from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.methods.pooling import POOLINGS
from sts_lightning.embeddings.scoring.reading import layer_reading, pooled_reading
from sts_lightning.embeddings.scoring.reading_cache import ReadingCache, forward_fingerprint
from sts_lightning.embeddings.scoring.reading_store import ReadingStore
from tests.helpers import WORDS

pytestmark = pytest.mark.usefixtures("one_thread")
SENTENCES = [" ".join(WORDS[i:i + 3 + i % 4]) for i in range(0, 30, 2)]
MEAN = pooled_reading("mean", POOLINGS["mean"])
LAYER1 = layer_reading(1, 3)


def _encoder(path, **kwargs) -> HFEncoder:
    return HFEncoder.from_pretrained(str(path), **{"max_length": 32, "batch_size": 4, **kwargs})


def _fill(encoder, root) -> ReadingStore:
    store = ReadingStore(encoder, ReadingCache(encoder, root))
    store.fill([MEAN, LAYER1], SENTENCES)
    return store


def _layer(store: ReadingStore) -> list[torch.Tensor]:
    memo = store.memos[LAYER1]
    return [memo.rows[store.ids_of[s]][0] for s in SENTENCES]


def test_a_warm_cache_serves_every_reading_without_a_forward_pass(tiny_model_dir, tmp_path):
    cold = _fill(_encoder(tiny_model_dir), tmp_path)
    assert cold.computed == len(SENTENCES) and cold.from_disk == 0
    encoder = _encoder(tiny_model_dir)  # another process's load of the same weights
    warm = _fill(encoder, tmp_path)
    assert encoder.sentences_encoded == 0 and warm.computed == 0 and warm.from_disk == 2 * len(SENTENCES)
    assert torch.equal(warm.pooled(MEAN, SENTENCES), cold.pooled(MEAN, SENTENCES))  # the bits written
    assert all(torch.equal(a, b) for a, b in zip(_layer(warm), _layer(cold), strict=True))
    view = warm.layer_view(LAYER1)
    view.encode(SENTENCES, POOLINGS["mean"])
    assert encoder.sentences_encoded == 0  # Latte-Mix's view: the token states come from the cache too


def test_new_sentences_are_encoded_and_added(tiny_model_dir, tmp_path):
    _fill(_encoder(tiny_model_dir), tmp_path)
    encoder = _encoder(tiny_model_dir)
    store = ReadingStore(encoder, ReadingCache(encoder, tmp_path))
    store.fill([MEAN], [*SENTENCES, "a red car"])
    assert encoder.sentences_encoded == 1 and store.from_disk == len(SENTENCES)


def test_other_weights_precision_or_length_are_other_keys(tiny_model_dir, other_tiny_model_dir, tmp_path):
    _fill(_encoder(tiny_model_dir), tmp_path)
    for encoder in (_encoder(other_tiny_model_dir), _encoder(tiny_model_dir, max_length=8)):
        assert _fill(encoder, tmp_path).from_disk == 0 and encoder.sentences_encoded == len(SENTENCES)
    changed = _encoder(tiny_model_dir)
    with torch.no_grad():  # one weight nudged in place, as a training step would
        changed.model.encoder.layer[0].output.dense.bias[0] += 1e-6
    assert forward_fingerprint(changed) != forward_fingerprint(_encoder(tiny_model_dir))
    assert _fill(changed, tmp_path).from_disk == 0


@pytest.mark.parametrize("damage", ["truncate", "sidecar", "nan"])
def test_a_damaged_shard_is_rebuilt_with_one_warning(tiny_model_dir, tmp_path, caplog, damage):
    import numpy as np

    first = _fill(_encoder(tiny_model_dir), tmp_path)
    shard = next(first.cache.shelf(MEAN).glob("*.npz"))
    if damage == "truncate":
        shard.write_bytes(shard.read_bytes()[:200])
    elif damage == "sidecar":
        shard.with_suffix(".json").unlink()
    else:
        with np.load(shard) as npz:
            arrays = dict(npz)
        arrays["rows"][3, 0] = np.nan
        with open(shard, "wb") as fh:
            np.savez(fh, **arrays)
    encoder = _encoder(tiny_model_dir)
    with caplog.at_level(logging.WARNING):
        again = _fill(encoder, tmp_path)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "embedding cache" in warnings[0] and "encoded again" in warnings[0]
    assert encoder.sentences_encoded == len(SENTENCES) and not shard.exists()
    assert torch.equal(again.pooled(MEAN, SENTENCES), first.pooled(MEAN, SENTENCES))
    third = _encoder(tiny_model_dir)
    assert _fill(third, tmp_path).from_disk == 2 * len(SENTENCES) and third.sentences_encoded == 0  # rebuilt


def test_an_unwritable_cache_is_one_warning_and_the_run_goes_on(tiny_model_dir, tmp_path, caplog):
    (tmp_path / "file").write_text("not a folder")
    encoder = _encoder(tiny_model_dir)
    with caplog.at_level(logging.WARNING):
        store = _fill(encoder, tmp_path / "file")
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING][0].startswith("embedding cache: not written")
    assert store.pooled(MEAN, SENTENCES).shape == (len(SENTENCES), 32)


def test_static_word_vectors_are_not_cached():
    from sts_lightning.embeddings.encoders.static import StaticWordEncoder

    encoder = StaticWordEncoder(["a", "dog"], torch.ones(2, 4))
    assert forward_fingerprint(encoder) is None and not ReadingCache(encoder).enabled
