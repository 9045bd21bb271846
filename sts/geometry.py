"""Alignment and uniformity (Wang & Isola, ICML 2020) of sentence vectors on an STS task's pairs, both lower is better.

SimCSE's protocol (Sec. 5): L2-normalised vectors, positives the pairs with a gold score above 4, uniformity over the
task's distinct sentences; one-vector representations (``{"embedding": (n, d)}``) only.

* ``alignment = E_pos ||f(x) - f(y)||^2``  (alpha = 2)
* ``uniformity = log E_{x != y} exp(-2 ||f(x) - f(y)||^2)``  (t = 2)
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

POSITIVE_SCORE = 4.0  # SimCSE's threshold for positive pairs
MAX_UNIFORMITY_SENTENCES = 4000  # n^2 / 2 distances: 8M at most, a fraction of a second


def alignment(x: torch.Tensor, y: torch.Tensor) -> float:
    """Mean squared distance of the L2-normalised rows ``x[i]``, ``y[i]`` (positive pairs); NaN for no pairs."""
    if x.shape[0] == 0:
        return float("nan")
    x, y = F.normalize(x.double(), dim=-1), F.normalize(y.double(), dim=-1)
    return float((x - y).pow(2).sum(-1).mean())


def uniformity(x: torch.Tensor, max_sentences: int = MAX_UNIFORMITY_SENTENCES) -> float:
    """``log mean_{i<j} exp(-2 ||x_i - x_j||^2)`` of the L2-normalised rows (NaN for fewer than 2), of evenly spaced
    rows above ``max_sentences``; float64 Gram with a log-sum-exp (no ``log 0``)."""
    n = x.shape[0]
    if n < 2:
        return float("nan")
    if n > max_sentences:
        x = x[torch.linspace(0, n - 1, max_sentences).round().long()]
        n = max_sentences
    x = F.normalize(x.double(), dim=-1)
    squared = (2.0 - 2.0 * (x @ x.T)).clamp_min(0.0)  # ||a - b||^2 of unit vectors
    upper = torch.triu_indices(n, n, offset=1)
    values = -2.0 * squared[upper[0], upper[1]]
    return float(torch.logsumexp(values, dim=0) - math.log(values.numel()))


def pair_geometry(vectors1: torch.Tensor, vectors2: torch.Tensor, gold: np.ndarray,
                  sentence_vectors: torch.Tensor) -> dict[str, float]:
    """``{"alignment", "uniformity", "positive_pairs"}`` of one task's pairs, the defined ones only."""
    positive = torch.as_tensor(np.asarray(gold, dtype=np.float64) > POSITIVE_SCORE)
    values = {"alignment": alignment(vectors1[positive], vectors2[positive]),
              "uniformity": uniformity(sentence_vectors)}
    # Undefined (no positive pair, one sentence): left out, not NaN (NaN != NaN, and JSON has no NaN).
    return {**{k: v for k, v in values.items() if math.isfinite(v)}, "positive_pairs": int(positive.sum())}


def tasks_geometry(rep: dict[str, torch.Tensor], rows1: torch.Tensor, rows2: torch.Tensor,
                   spans: list[tuple]) -> dict[str, dict[str, float]]:
    """Geometry per task from one representation ``rep``; ``spans``: ``(task, subset, start, stop)``."""
    vectors = rep.get("embedding")
    if vectors is None or vectors.ndim != 2:
        return {}
    vectors = vectors.float().cpu()
    by_task: dict[str, list[tuple]] = {}
    for task, name, lo, hi in spans:
        by_task.setdefault(task.name, []).append((task.subsets[name].scores, lo, hi))
    out = {}
    for task_name, parts in by_task.items():
        index = torch.cat([torch.arange(lo, hi) for _, lo, hi in parts])
        first, second = rows1[index], rows2[index]
        gold = np.concatenate([scores for scores, _, _ in parts])
        distinct = torch.unique(torch.cat([first, second]))
        out[task_name] = pair_geometry(vectors[first], vectors[second], gold, vectors[distinct])
    return out
