"""``benchmarks.studies.embedding_geometry``: whitening, isotropy and the length shortcut on constructed vectors."""

from __future__ import annotations

import numpy as np

from benchmarks.studies.embedding_geometry import geometry_row, whitening


def test_whitening_gives_identity_covariance():
    rng = np.random.default_rng(0)
    corpus = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4)) + 3.0
    mean, w = whitening(corpus)
    np.testing.assert_allclose(np.cov(((corpus - mean) @ w).T), np.eye(4), atol=1e-6)


def test_geometry_row_sees_a_shared_offset_and_a_length_code():
    rng = np.random.default_rng(0)
    n, dim = 300, 32
    content = rng.normal(size=(n, dim))
    gold = rng.uniform(0, 5, n)
    # pair b = a mixed with noise by the gold score; every vector carries a large common direction of
    # random strength, which dominates raw cosines and which whitening (high variance) scales down
    offset = lambda m: rng.normal(10.0, 3.0, (m, 1)) * np.ones(dim)  # noqa: E731
    a = content + offset(n)
    b = (gold[:, None] / 5) * content + (1 - gold[:, None] / 5) * rng.normal(size=(n, dim)) + offset(n)
    corpus_content = rng.normal(size=(1000, dim))
    corpus = corpus_content + offset(1000)
    lengths = rng.integers(5, 40, n)
    row = geometry_row(a, b, gold, corpus, lengths, lengths, rng.integers(5, 40, 1000))
    assert row["random_pair_cosine"] > 0.9  # the offset dominates raw cosines
    assert row["whitened"] > row["cosine"] + 20 and row["whitened"] > 80  # scaling it down recovers the ranking
    assert abs(row["norm_vs_length"]) < 0.15
    # a length code in the vectors: the norm follows the length
    corpus_len = rng.integers(5, 40, 1000)
    coded = corpus_content + corpus_len[:, None] * np.ones(dim)
    assert geometry_row(a, b, gold, coded, lengths, lengths, corpus_len)["norm_vs_length"] > 0.8
