"""The count-based reference of ``benchmarks.studies.cooccurrence_ceiling``: words sharing contexts get similar vectors."""

from __future__ import annotations

import numpy as np

from benchmarks.studies.cooccurrence_ceiling import bag_of_vectors, idf_weights, ppmi_svd_vectors, spearman_of


def test_words_with_shared_contexts_are_closer_than_words_without():
    rng = np.random.default_rng(0)
    # ids 0/1 occur with contexts 4-7, ids 2/3 with contexts 8-11; id 12 is in every sentence (a stopword)
    corpus = [[int(w), *rng.choice([4, 5, 6, 7], 3).tolist(), 12] for w in rng.choice([0, 1], 200)]
    corpus += [[int(w), *rng.choice([8, 9, 10, 11], 3).tolist(), 12] for w in rng.choice([2, 3], 200)]
    table = ppmi_svd_vectors(corpus, vocab=13, window=4, dim=4)
    cos = lambda a, b: float(table[a] @ table[b] / (np.linalg.norm(table[a]) * np.linalg.norm(table[b])))  # noqa: E731
    assert cos(0, 1) > 0.9 and cos(2, 3) > 0.9 and cos(0, 2) < 0.5
    idf = idf_weights(corpus, 13)
    assert idf[12] < idf[0] and idf[12] == min(idf)


def test_bag_of_vectors_and_spearman():
    table = np.eye(3)
    vectors = bag_of_vectors(lambda s: [int(c) for c in s], ["01", "2"], table, None)
    assert np.allclose(vectors, [[0.5, 0.5, 0], [0, 0, 1]])
    a = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    b = np.array([[0.0, 1.0], [1.0, 1.0], [1.0, 0.0]])  # cosines 0, 0.71, 1
    assert abs(spearman_of(a, b, [0.0, 2.0, 5.0]) - 100) < 1e-9 and abs(spearman_of(a, b, [5.0, 2.0, 0.0]) + 100) < 1e-9
