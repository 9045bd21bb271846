"""Sen2Pro: augmentation ops, MC-dropout sampling, banded moments, Eq. 7/8 distance, seeding, errors."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.encoders.static import StaticWordEncoder
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.sen2pro.augment import (
    augment,
    augment_sentence,
    build_vocabulary,
    drop_word,
    insert_word,
    replace_word,
    stable_seed,
    swap_words,
    validate_ops,
)
from sts_lightning.embeddings.methods.sen2pro.scorer import (
    Sen2ProScorer,
    balance_alpha,
    banded_moments,
)
from sts_lightning.embeddings.scoring.registry import build_scorer
from tests.helpers import WORDS
from tests.tolerance import tolerance_kwargs

SENTENCES = ["a man plays a guitar .", "a woman cuts an onion .", "a dog runs in the park .", "dog"]
VOCAB = ("cat", "horse", "piano", "red")


# ---------------------------------------------------------------- augmentation


def test_each_op_does_what_it_says():
    words = "a man plays the guitar".split()
    for seed in range(30):
        rng = random.Random(seed)
        dropped = drop_word(words, rng)
        assert len(dropped) == 4 and any(dropped == words[:i] + words[i + 1:] for i in range(5))
        swapped = swap_words(words, rng)
        diff = [i for i in range(5) if swapped[i] != words[i]]
        assert sorted(swapped) == sorted(words) and len(diff) == 2
        assert swapped[diff[0]] == words[diff[1]] and swapped[diff[1]] == words[diff[0]]
        replaced = replace_word(words, VOCAB, rng)
        diff = [i for i in range(5) if replaced[i] != words[i]]
        assert len(replaced) == 5 and len(diff) == 1 and replaced[diff[0]] in VOCAB
        inserted = insert_word(words, VOCAB, rng)
        assert len(inserted) == 6
        assert any(inserted[:i] + inserted[i + 1:] == words and inserted[i] in VOCAB for i in range(6))


def test_ops_refuse_what_would_empty_or_not_change_the_sentence():
    rng = random.Random(0)
    with pytest.raises(ValueError):
        drop_word(["dog"], rng)
    with pytest.raises(ValueError):
        swap_words(["dog", "dog"], rng)
    with pytest.raises(ValueError):
        replace_word(["dog"], ("dog",), rng)


def test_op_set_is_respected_and_copies_never_empty():
    for op, check in [("drop", lambda c: len(c.split()) == 5), ("insert", lambda c: len(c.split()) == 7),
                      ("swap", lambda c: sorted(c.split()) == sorted("a man plays a guitar .".split())),
                      ("replace", lambda c: len(c.split()) == 6)]:
        copies = augment(["a man plays a guitar ."], 20, seed=3, ops=(op,), vocabulary=VOCAB)[0]
        assert all(check(c) and c != "a man plays a guitar ." for c in copies), op
    # A one-word sentence is never dropped (another op is drawn); only-drop leaves it as it is.
    for c in augment(["dog"], 50, seed=1, vocabulary=VOCAB)[0]:
        assert c.strip() and len(c.split()) >= 1
    assert augment(["dog"], 3, ops=("drop",))[0] == ["dog"] * 3


def test_augmentation_is_seeded_and_independent_of_other_sentences():
    a = augment(SENTENCES, 6, seed=7)
    assert a == augment(SENTENCES, 6, seed=7)
    assert a != augment(SENTENCES, 6, seed=8)
    # Default vocabulary: the same word set in another order gives each sentence the same copies.
    b = augment(SENTENCES[::-1], 6, seed=7)
    assert b[::-1] == a
    # Explicit vocabulary: a sentence's copies do not depend on the other sentences at all.
    alone = augment([SENTENCES[1]], 6, seed=7, vocabulary=VOCAB)[0]
    among = augment(["two cats eat food .", SENTENCES[1], "x y"], 6, seed=7, vocabulary=VOCAB)[1]
    assert alone == among
    assert stable_seed("augment", 0, 0, "a man") == 663955389672258394  # process-independent (no hash())


def test_vocabulary_is_words_without_punctuation():
    assert build_vocabulary(["A dog's bone.", "a dog, x-ray"]) == ("A", "a", "bone", "dog", "dog's", "x-ray")


def test_augment_sentence_uses_one_op():
    out = augment_sentence("a b c", ("z",), random.Random(0), ops=("insert",))
    assert out.split().count("z") == 1 and len(out.split()) == 4


# ---------------------------------------------------------------- estimation and distance


# float32 means / variances over 7 samples (two sums chained) against numpy's float64.
SEVEN_SAMPLES = tolerance_kwargs(torch.float32, reduction=7, depth=2)


def test_banded_moments_match_numpy_covariance_diagonal():
    rng = np.random.default_rng(0)
    samples = rng.normal(size=(7, 3, 5)).astype(np.float32)
    mu, var = banded_moments(torch.from_numpy(samples))
    for i in range(3):
        np.testing.assert_allclose(mu[i].numpy(), samples[:, i].mean(0), **SEVEN_SAMPLES)
        np.testing.assert_allclose(var[i].numpy(), np.diag(np.cov(samples[:, i].T, bias=True)), **SEVEN_SAMPLES)


def sen2pro_distance(a, b, alpha) -> torch.Tensor:
    """Eq. 7 as the scorer computes it: the negative of ``Sen2ProScorer.similarity``."""
    words = ["a", "b"]
    scorer = Sen2ProScorer(StaticWordEncoder(words, np.zeros((len(words), 2))), alpha=alpha)
    return -scorer.similarity(a, b)


def _hand_reps():
    a = {"mean": torch.tensor([[1.0, 2.0], [0.0, 0.0], [1.0, 1.0]]),
         "var": torch.tensor([[0.1, 0.3], [0.2, 0.2], [0.5, 0.5]])}
    b = {"mean": torch.tensor([[0.0, 0.0], [1.0, -1.0], [1.0, 1.0]]),
         "var": torch.tensor([[0.2, 0.1], [0.2, 0.6], [0.5, 0.5]])}
    dmu = torch.tensor([3.0, 2.0, 0.0])
    dvar = torch.tensor([0.3, 0.4, 0.0])
    return a, b, dmu.double(), dvar.double()


def test_distance_fixed_alpha():
    a, b, dmu, dvar = _hand_reps()
    d = sen2pro_distance(a, b, 0.25)
    torch.testing.assert_close(d, (0.75 * dmu + 0.25 * dvar).float())


def test_distance_paper_alpha_per_pair_and_its_algebra():
    a, b, dmu, dvar = _hand_reps()
    alpha = balance_alpha(dmu, dvar, "paper")
    torch.testing.assert_close(alpha, torch.tensor([10.0, 5.0, 0.0], dtype=torch.float64))  # 0 where dvar = 0
    torch.testing.assert_close((alpha * dvar)[:2], dmu[:2])  # alpha * l1(dvar) == l1(dmu)
    expected = torch.tensor([2 * 3 - 9 / 0.3, 2 * 2 - 4 / 0.4, 0.0])
    torch.testing.assert_close(sen2pro_distance(a, b, "paper"), expected)


def test_distance_dataset_alpha_is_one_factor_for_all_pairs():
    a, b, dmu, dvar = _hand_reps()
    big_a = dmu.mean() / dvar.mean()
    torch.testing.assert_close(sen2pro_distance(a, b, "dataset"), ((1 - big_a) * dmu + big_a * dvar).float())


def test_distance_inverse_alpha_is_the_inverted_ratio():
    a, b, dmu, dvar = _hand_reps()
    w = dvar.mean() / dmu.mean()
    torch.testing.assert_close(sen2pro_distance(a, b, "inverse"), ((1 - w) * dmu + w * dvar).float())


def test_normalize_puts_samples_on_the_unit_sphere(tiny_encoder):
    rep = Sen2ProScorer(tiny_encoder, n_samples=2, uncertainty="data", normalize=True).represent(["a man sings ."])
    assert rep["mean"].norm(dim=-1).item() <= 1.0 + 1e-6


def test_zero_variance_gap_falls_back_to_l1_of_means():
    a, b, dmu, _ = _hand_reps()
    b = {"mean": b["mean"], "var": a["var"].clone()}
    for mode in ("paper", "dataset"):
        torch.testing.assert_close(sen2pro_distance(a, b, mode), dmu.float())


# ---------------------------------------------------------------- the scorer on real encoders


def test_mc_dropout_varies_passes_and_restores_eval_mode(tiny_encoder):
    state = torch.random.get_rng_state()
    rep = Sen2ProScorer(tiny_encoder, n_samples=3, uncertainty="model").represent(SENTENCES)
    assert rep["mean"].shape == rep["var"].shape == (4, 32)
    assert bool((rep["var"].sum(1) > 0).all())
    assert not tiny_encoder.model.training
    assert torch.equal(torch.random.get_rng_state(), state)  # caller's RNG untouched


def test_data_uncertainty_in_eval_mode_is_deterministic_and_varies(tiny_encoder):
    scorer = Sen2ProScorer(tiny_encoder, n_samples=3, uncertainty=["data"], seed=2)
    rep = scorer.represent(SENTENCES)
    assert bool((rep["var"].sum(1) > 0).all())
    assert torch.equal(rep["var"], scorer.represent(SENTENCES)["var"])


def test_same_seed_same_representation_other_seed_differs(tiny_encoder):
    r1 = Sen2ProScorer(tiny_encoder, n_samples=3, seed=5).represent(SENTENCES)
    r2 = Sen2ProScorer(tiny_encoder, n_samples=3, seed=5).represent(SENTENCES)
    r3 = Sen2ProScorer(tiny_encoder, n_samples=3, seed=6).represent(SENTENCES)
    for k in ("mean", "var"):
        assert torch.equal(r1[k], r2[k])
        assert not torch.allclose(r1[k], r3[k])


def test_combined_is_average_of_sources(tiny_encoder):
    both = Sen2ProScorer(tiny_encoder, n_samples=2, uncertainty="model+data").represent(SENTENCES)
    m = Sen2ProScorer(tiny_encoder, n_samples=2, uncertainty="model").represent(SENTENCES)
    d = Sen2ProScorer(tiny_encoder, n_samples=2, uncertainty="data").represent(SENTENCES)
    for k in ("mean", "var"):
        torch.testing.assert_close(both[k], (m[k] + d[k]) / 2)


def test_static_encoder_has_zero_model_variance_and_scores_by_l1_of_means():
    vectors = np.random.default_rng(0).normal(size=(len(WORDS), 8))
    scorer = Sen2ProScorer(StaticWordEncoder(WORDS, vectors), n_samples=4, uncertainty="model")
    rep = scorer.represent(["a man plays", "a dog runs"])
    assert torch.count_nonzero(rep["var"]) == 0
    sims = scorer.score_pairs(["a man plays"], ["a dog runs"])
    # default fixed alpha 0.05 and a zero variance gap: 0.95 * l1 of the means
    torch.testing.assert_close(sims, -0.95 * (rep["mean"][0] - rep["mean"][1]).abs().sum().reshape(1))


def test_score_pairs_and_registry(tiny_encoder):
    defaults = {"sen2pro": {"pooling": "first_last_avg", "n_samples": 15, "uncertainty": ["model", "data"],
                            "alpha": 0.05, "seed": 0}}
    scorer = build_scorer({"name": "sen2pro", "n_samples": 2, "alpha": "dataset"}, tiny_encoder, defaults)
    assert isinstance(scorer, Sen2ProScorer) and not hasattr(scorer, "pool")  # not taken for a pooling scorer
    sims = scorer.score_pairs(SENTENCES[:3], SENTENCES[1:])
    assert sims.shape == (3,) and bool(torch.isfinite(sims).all())
    assert scorer.last_alpha is not None and scorer.last_alpha.ndim == 0


@pytest.mark.parametrize("kwargs", [
    {"n_samples": 1}, {"n_samples": True}, {"n_samples": 2.5}, {"uncertainty": "weather"}, {"uncertainty": ()},
    {"ops": ("shuffle",)}, {"ops": ()}, {"alpha": "bogus"}, {"alpha": 1.5}, {"alpha": -0.1}, {"alpha": True},
    {"pooling": "nope"}, {"seed": "0"},
])
def test_config_errors(tiny_encoder, kwargs):
    with pytest.raises(ConfigError):
        Sen2ProScorer(tiny_encoder, **kwargs)


def test_validate_ops_accepts_a_single_name():
    assert validate_ops("drop") == ("drop",)
