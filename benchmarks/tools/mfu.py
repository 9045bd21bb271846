"""Model FLOPs utilisation (MFU): the useful arithmetic a run did per second over what this device's matmul reaches.

Why its own file: the encode and training benchmarks and the end-to-end step meter must count FLOPs the same way,
or their MFU figures cannot be compared. The formula, for a BERT encoder (a multiply-add counts as 2 FLOPs):

    forward FLOPs of one sentence of L real tokens = layers * (8 L h^2 + 4 L h i + 4 L^2 h)

(Q, K, V and output projections 4 x 2 L h^2; the feed-forward in and out 2 x 2 L h i; the attention scores
Q K^T and the weighted sum A V 2 x 2 L^2 h over all heads). Embeddings, LayerNorms, softmax and the pooler are
left out (under 1% of a BERT-base forward). *Useful* means over each sentence's own real tokens: padding, and the
cross-sentence attention of packed rows, are work a run does but not work the task needs, so both engines are
credited with the same useful FLOPs and their MFU ratio equals their speed ratio.

    training step FLOPs = 3 x forward FLOPs   (the backward pass costs twice the forward: input and weight grads)
    MLM adds its head on the predicted positions: 2 n (h^2 + h V) forward (transform and tied decoder)
    MFU = useful FLOPs / seconds / peak,   peak = FLOP/s of an n x n x n torch.mm in the run's dtype, measured in
          the same process on the same device (n = 8192 on a GPU, 1024 on a CPU)
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import torch

from benchmarks.tools.device_timing import CPU, synchronize

DTYPES = {"fp32": torch.float32, "32": torch.float32, "32-true": torch.float32, "bf16": torch.bfloat16,
          "bf16-mixed": torch.bfloat16, "bf16-true": torch.bfloat16, "fp16": torch.float16,
          "16-mixed": torch.float16}


def dims(config) -> tuple[int, int, int]:
    """(layers, hidden, intermediate) of a Hugging Face BERT-like config."""
    return int(config.num_hidden_layers), int(config.hidden_size), int(config.intermediate_size)


def forward_flops(config, lengths: Iterable[int]) -> float:
    """Useful forward FLOPs of the encoder over sentences of these real token lengths (the formula above)."""
    layers, h, inter = dims(config)
    return float(sum(layers * (8 * n * h * h + 4 * n * h * inter + 4 * n * n * h) for n in lengths))


def mlm_head_flops(config, predicted: float) -> float:
    """Forward FLOPs of BERT's MLM head on ``predicted`` positions: dense transform h x h, decoder h x vocabulary."""
    h, vocab = int(config.hidden_size), int(config.vocab_size)
    return 2.0 * predicted * (h * h + h * vocab)


def training_flops(config, lengths: Iterable[int], predicted: float = 0.0) -> float:
    """Useful FLOPs of one training step: 3 x (encoder forward + MLM head forward on ``predicted`` positions)."""
    return 3.0 * (forward_flops(config, lengths) + mlm_head_flops(config, predicted))


def dtype_of(precision: str) -> torch.dtype:
    """The matmul dtype of a run's precision name (``fp32`` / ``bf16`` / ``fp16`` or Lightning's names)."""
    return DTYPES[str(precision)]


def matmul_peak(device: torch.device = CPU, dtype: torch.dtype = torch.float32, n: int | None = None,
                repeats: int | None = None) -> float:
    """FLOP/s of an ``n x n x n`` ``torch.mm`` in ``dtype`` on ``device`` (the best of two timed rounds)."""
    device = torch.device(device)
    n = n or (8192 if device.type == "cuda" else 1024)
    repeats = repeats or (20 if device.type == "cuda" else 5)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(2):
        synchronize(device)
        t0 = time.perf_counter()
        for _ in range(repeats):
            torch.mm(a, b)
        synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 * repeats / best


def peak_label(device: torch.device, dtype: torch.dtype, n: int | None = None) -> str:
    """How the peak was measured, for the printed line: ``bf16 8192^3 torch.mm``."""
    name = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    return f"{name} {n or (8192 if torch.device(device).type == 'cuda' else 1024)}^3 torch.mm"
