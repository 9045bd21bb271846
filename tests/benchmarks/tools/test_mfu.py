"""benchmarks/tools/mfu.py: the FLOP count equals a hand count of every matmul of a tiny BERT; the peak is a rate."""

from __future__ import annotations

import torch
from transformers import BertConfig

from benchmarks.tools.mfu import dtype_of, forward_flops, matmul_peak, mlm_head_flops, training_flops


def hand_count(h: int, inter: int, heads: int, layers: int, length: int) -> int:
    """Every matmul of one BERT layer written out as (m, k, n): 2 m k n FLOPs each, times the layers."""
    d = h // heads
    matmuls = [(length, h, h)] * 3  # Q, K, V projections
    matmuls += [(length, d, length)] * heads  # scores Q K^T, per head
    matmuls += [(length, length, d)] * heads  # weighted sum A V, per head
    matmuls += [(length, h, h), (length, h, inter), (length, inter, h)]  # output projection, FFN in, FFN out
    return layers * sum(2 * m * k * n for m, k, n in matmuls)


def test_forward_flops_equal_the_hand_count_of_a_tiny_bert():
    config = BertConfig(hidden_size=8, intermediate_size=20, num_attention_heads=2, num_hidden_layers=3,
                        vocab_size=50)
    lengths = [3, 5, 1]
    expected = sum(hand_count(8, 20, 2, 3, n) for n in lengths)
    assert forward_flops(config, lengths) == expected
    assert training_flops(config, lengths) == 3 * expected
    # the MLM head on 4 predicted positions: transform 8 x 8 and the tied decoder 8 x 50
    assert mlm_head_flops(config, 4) == 4 * (2 * 8 * 8 + 2 * 8 * 50)
    assert training_flops(config, lengths, predicted=4) == 3 * (expected + 4 * (2 * 8 * 8 + 2 * 8 * 50))


def test_padding_adds_no_useful_flops():
    """Useful FLOPs are per sentence: the same sentences cost the same whatever batch or padding ran them."""
    config = BertConfig(hidden_size=8, intermediate_size=20, num_attention_heads=2, num_hidden_layers=1)
    assert forward_flops(config, [2, 6]) == forward_flops(config, [2]) + forward_flops(config, [6])
    assert forward_flops(config, [2, 6]) < forward_flops(config, [6, 6])


def test_matmul_peak_is_a_positive_rate_in_the_runs_dtype():
    assert matmul_peak(torch.device("cpu"), dtype_of("fp32"), n=64, repeats=2) > 0
    assert dtype_of("bf16-mixed") == torch.bfloat16 and dtype_of("32") == torch.float32
