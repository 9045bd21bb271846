"""SBERT-WK: the vectorised pool against the independent numpy loop, pinned values, config errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks.speed.sbert_wk_loop import sbert_wk_loop
from sts_lightning.embeddings.encoders.token_batch import TokenBatch
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.methods.sbert_wk import (
    SBERTWKScorer,
    context_windows,
    sbert_wk_pool,
    window_groups,
)
from tests.helpers import token_batch
from tests.tolerance import float_tolerance, tolerance_kwargs

# Different lengths in one padded batch; the last is a single word ([CLS] w [SEP]).
SENTENCES = [
    "a man plays a guitar in the park .",
    "a woman cuts an onion .",
    "two children are running on the beach with a ball .",
    "the dog runs",
    "cat",
]


@pytest.fixture(scope="module")
def six_layer_encoder(tmp_path_factory):
    """A 6-layer random BERT (7 hidden states), so layer_start=4 leaves 3 layers: the window edge cases."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from sts_lightning.embeddings.encoders.hf import HFEncoder
    from tests.helpers import WORDS

    path = tmp_path_factory.mktemp("tiny_bert6")
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + WORDS))
    # ``vocab=`` (not ``vocab_file=``, which transformers 5 ignores, mapping every word to [UNK]).
    tokenizer = BertTokenizerFast(vocab=str(path / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(6)
    config = BertConfig(vocab_size=len(WORDS) + 7, hidden_size=32, num_hidden_layers=6, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    encoder = HFEncoder.from_pretrained(str(path), max_length=32, batch_size=8)
    assert encoder.tokenize(["a cat"])[0] == [2, 7, 12, 3]  # real word ids, not [UNK]
    return encoder


def loop_on(batch: TokenBatch, layer_start: int, window: int) -> np.ndarray:
    states = torch.stack(batch.hidden_states, 1).double().numpy()
    return sbert_wk_loop(states, batch.attention_mask.numpy(), layer_start, window)


# The six-layer BERT below: 6 layers with intermediate 64, then SBERT-WK's window QR, weighting and averaging.
SIX_LAYER = tolerance_kwargs(torch.float32, reduction=64, depth=8)
# Ours (float32 pooling) against the float64 loop on the SAME float32 states: only the pooling's rounding differs.
# Why a cosine distance: the pool divides by norms of near-collinear layer vectors (ill-conditioned), so entries
# move more than the direction does; the cosine distance is second order in the entry errors.
POOL_COS_DIST = float_tolerance(torch.float32, reduction=64, depth=3, safety=64.0)


def max_cos_dist(a, b) -> float:
    a, b = torch.as_tensor(np.asarray(a), dtype=torch.float64), torch.as_tensor(np.asarray(b), dtype=torch.float64)
    return float((1 - torch.nn.functional.cosine_similarity(a, b, dim=1)).max())


def test_windows_follow_python_slices():
    # 3 fused layers, m=2: k=1's left slice [-1:1] wraps to empty; k=2 sees 0 and 1.
    assert context_windows(3, 2, "code") == [[1, 2], [2], [0, 1]]
    assert context_windows(3, 2, "paper") == [[1, 2], [0, 2], [0, 1]]
    # m larger than the layers: the negative start wraps to a NON-empty slice.
    assert context_windows(3, 4, "code") == [[1, 2], [0, 2], [1]]


def test_window_groups_stack_positions_by_context_size():
    # 9 fused layers (all-mpnet-base-v2 from layer 4), m=2: three sizes, so three batched Choleskys.
    groups = window_groups(9, 2, "code")
    assert [(ks, len(ctxs[0])) for ks, ctxs in groups] == [([0, 1, 8], 2), ([2, 3, 4, 5, 6], 4), ([7], 3)]
    windows = context_windows(9, 2, "code")
    assert all(ctx == windows[k] for ks, ctxs in groups for k, ctx in zip(ks, ctxs, strict=True))


@pytest.mark.parametrize("layer_start,window", [(0, 1), (0, 2), (0, 4)])
def test_parity_tiny_bert(tiny_encoder, layer_start, window):
    batch = token_batch(tiny_encoder, SENTENCES)
    ours = sbert_wk_pool(batch, layer_start=layer_start, window=window)
    assert torch.isfinite(ours).all()
    assert max_cos_dist(ours, loop_on(batch, layer_start, window)) < POOL_COS_DIST


@pytest.mark.parametrize("layer_start,window", [(4, 2), (4, 1), (4, 4), (0, 2), (1, 3), (2, 4)])
def test_parity_six_layer_bert(six_layer_encoder, layer_start, window):
    batch = token_batch(six_layer_encoder, SENTENCES)
    ours = sbert_wk_pool(batch, layer_start=layer_start, window=window)
    assert max_cos_dist(ours, loop_on(batch, layer_start, window)) < POOL_COS_DIST


def test_float64_states_match_loop_to_rounding(six_layer_encoder):
    """On float64 states the closed form equals the QR loop to ~1e-12: same maths, not an approximation."""
    batch = token_batch(six_layer_encoder, SENTENCES)
    batch64 = TokenBatch(tuple(h.double() for h in batch.hidden_states), batch.attention_mask,
                         batch.special_tokens_mask)
    ours = sbert_wk_pool(batch64).numpy()
    np.testing.assert_allclose(ours, loop_on(batch, 4, 2), rtol=0, atol=1e-10)


def test_pinned_output(six_layer_encoder):
    """Guards against silent behaviour changes; values computed once after parity was verified."""
    vec = sbert_wk_pool(token_batch(six_layer_encoder, SENTENCES))
    np.testing.assert_allclose(vec[0, :5].numpy(), [0.902064, 1.226122, -1.739602, -0.148941, 0.040481],
                               **SIX_LAYER)


def test_padding_invariance(six_layer_encoder):
    together = sbert_wk_pool(token_batch(six_layer_encoder, SENTENCES))
    for i, s in enumerate(SENTENCES):
        alone = sbert_wk_pool(token_batch(six_layer_encoder, [s]))
        torch.testing.assert_close(alone[0], together[i], **SIX_LAYER)


def test_scorer_and_paper_variant(six_layer_encoder):
    code = SBERTWKScorer(six_layer_encoder)
    paper = SBERTWKScorer(six_layer_encoder, variant="paper")
    assert code.name == "sbert_wk"
    a = code.represent(SENTENCES)["embedding"]
    b = paper.represent(SENTENCES)["embedding"]
    assert a.shape == b.shape == (len(SENTENCES), 32)
    assert torch.isfinite(b).all()
    assert max_cos_dist(a, b) > 1e-4  # the variants really differ
    scores = code.score_pairs(SENTENCES[:2], SENTENCES[1:3])
    assert scores.shape == (2,) and torch.isfinite(scores).all()


def test_omega_extremes_differ(six_layer_encoder):
    batch = token_batch(six_layer_encoder, SENTENCES)
    half = sbert_wk_pool(batch)
    ends = [sbert_wk_pool(batch, omega=w) for w in (0.0, 1.0)]
    torch.testing.assert_close(half, (ends[0] + ends[1]) / 2, **SIX_LAYER)  # linear in omega
    assert max_cos_dist(ends[0], ends[1]) > 1e-6


def test_single_token_sentence_is_finite(six_layer_encoder):
    paper = sbert_wk_pool(token_batch(six_layer_encoder, ["cat"]), variant="paper")
    assert torch.isfinite(paper).all()


@pytest.mark.parametrize("kwargs,match", [
    ({"variant": "nope"}, "unknown SBERT-WK variant"),
    ({"window": 0}, "window"),
    ({"omega": 1.5}, "omega"),
    ({"layer_start": 7}, "outside"),
    ({"layer_start": 5}, "needs >= 3"),
    ({"layer_start": 4, "window": 3}, "no context"),
])
def test_config_errors(six_layer_encoder, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        SBERTWKScorer(six_layer_encoder, **kwargs)
    with pytest.raises(ConfigError, match=match):
        sbert_wk_pool(token_batch(six_layer_encoder, SENTENCES[:1]), **kwargs)


def test_encoder_with_too_few_layers(tiny_encoder):
    with pytest.raises(ConfigError, match="outside"):
        SBERTWKScorer(tiny_encoder, layer_start=4)  # 3 hidden states
    one_layer = TokenBatch((torch.randn(1, 4, 8),), torch.ones(1, 4), torch.zeros(1, 4, dtype=torch.bool))
    with pytest.raises(ConfigError, match="static word vectors"):
        sbert_wk_pool(one_layer, layer_start=0)


def test_sentence_without_tokens_is_a_data_error():
    states = tuple(torch.randn(2, 3, 8) for _ in range(7))
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    special = torch.tensor([[True, False, True], [True, True, False]])  # row 1: [CLS][SEP] only
    with pytest.raises(DataError, match=r"row\(s\) \[1\]"):
        sbert_wk_pool(TokenBatch(states, mask, special), variant="paper")
    assert torch.isfinite(sbert_wk_pool(TokenBatch(states, mask, special))).all()  # code keeps [CLS]


def test_linearly_dependent_states_are_a_data_error():
    states = [torch.randn(1, 4, 8, dtype=torch.float64) for _ in range(3)]
    states[1][0, 2] = 0.0  # token 2 has a zero state in fused layer 1: layer 0's context [1, 2] is singular
    batch = TokenBatch(tuple(states), torch.ones(1, 4), torch.zeros(1, 4, dtype=torch.bool))
    with pytest.raises(DataError, match=r"linearly dependent states in fused layers \[1, 2\]"):
        sbert_wk_pool(batch, layer_start=0)


def test_speed_benchmark_prints_the_ratio_last(monkeypatch, capsys, tiny_model_dir, tiny_data_dir):
    """``benchmarks/speed/sbert_wk_speed.py`` end to end on the tiny model: parity line, Spearman line, ratio last."""
    import re
    import sys

    from benchmarks.speed import sbert_wk_speed

    monkeypatch.setattr(sys, "argv", ["sbert_wk_speed", "--model", str(tiny_model_dir), "--data-dir",
                                      str(tiny_data_dir), "--repeats", "2", "--batch-size", "8",
                                      "--parity-sentences", "10"])
    sbert_wk_speed.main()
    lines = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"ratio_sbert_wk_vs_mean \d+\.\d\d", lines[-1]), lines[-1]
    assert re.fullmatch(r"stsb-dev Spearman x100: mean -?\d+\.\d\d, sbert_wk -?\d+\.\d\d", lines[-2]), lines[-2]
    parity = next(line for line in lines if line.startswith("parity"))
    assert float(re.search(r"distance to the per-token loop (\S+);", parity).group(1)) < POOL_COS_DIST
