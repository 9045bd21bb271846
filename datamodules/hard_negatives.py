"""Mined hard negatives: (anchor, positive) pairs -> (anchor, positive, negative) triplets.

For each anchor, the positives of OTHER pairs its encoder ranks closest, within a rank window and below its own
positive by a margin: sentence-transformers' ``util.mine_hard_negatives`` (``output_format="triplet"``) on our
embeddings (a test checks both give the same triplets), ``top`` or seeded ``random`` choice.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from sts_lightning.embeddings.errors import ConfigError, unknown_choice

SAMPLING = ("top", "random")
CHUNK = 4096  # queries scored against the corpus at a time: never the full (queries x corpus) matrix


@dataclass(frozen=True)
class MiningOptions:
    range_min: int = 0
    range_max: int | None = None
    absolute_margin: float | None = None
    relative_margin: float | None = None
    num_negatives: int = 3
    sampling: str = "top"
    seed: int = 0

    def check(self) -> None:
        """One ``ConfigError`` naming the command-line option, before any file or encoder is loaded."""
        if self.num_negatives < 1:
            raise ConfigError(f"--num-negatives must be at least 1, got {self.num_negatives}")
        if self.range_min < 0:
            raise ConfigError(f"--range-min must be >= 0, got {self.range_min}")
        if self.range_max is not None and self.range_min >= self.range_max:
            raise ConfigError(f"--range-min ({self.range_min}) must be smaller than --range-max ({self.range_max})")
        if self.range_max is not None and self.num_negatives > self.range_max - self.range_min:
            raise ConfigError(f"--num-negatives {self.num_negatives} is more than the {self.range_max - self.range_min}"
                              f" ranks in [--range-min, --range-max) = [{self.range_min}, {self.range_max})")
        if self.absolute_margin is not None and self.absolute_margin < 0:
            raise ConfigError(f"--absolute-margin must be >= 0, got {self.absolute_margin}")
        if self.relative_margin is not None and not 0 <= self.relative_margin < 1:
            raise ConfigError(f"--relative-margin must be in [0, 1), got {self.relative_margin}")
        if self.sampling not in SAMPLING:
            raise unknown_choice("--sampling", self.sampling, SAMPLING)

    def window_end(self, max_positives: int) -> int:
        """``range_max``, or sentence-transformers' default for it."""
        if self.range_max is not None:
            return self.range_max
        margin = self.absolute_margin is not None or self.relative_margin is not None
        return self.range_min + self.num_negatives * (10 if margin else 1) + max_positives


@dataclass
class Triplets:
    anchors: list[str]
    positives: list[str]
    negatives: list[str]

    def __len__(self) -> int:
        return len(self.anchors)


def _unique(texts: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(texts))


def _top_candidates(queries: torch.Tensor, corpus: torch.Tensor, k: int, width: int):
    """Per query the ``k`` best corpus rows (scores, indices), padded to ``width`` with -inf / -1."""
    scores, indices = [], []
    for start in range(0, len(queries), CHUNK):
        s, i = torch.topk(queries[start:start + CHUNK] @ corpus.T, k=k, dim=1)
        scores.append(s)
        indices.append(i)
    scores, indices = torch.cat(scores), torch.cat(indices)
    missing = width - scores.size(1)
    if missing > 0:
        scores = torch.cat([scores, scores.new_full((len(scores), missing), -float("inf"))], dim=1)
        indices = torch.cat([indices, indices.new_full((len(indices), missing), -1)], dim=1)
    return scores, indices


def mine_triplets(anchors: Sequence[str], positives: Sequence[str],
                  embed: Callable[[list[str]], torch.Tensor], options: MiningOptions) -> Triplets:
    """Triplets of ``anchors[i]``, ``positives[i]`` and mined negatives; ``embed`` maps texts to vectors (any scale)."""
    options.check()
    queries, corpus = _unique(anchors), _unique(positives)
    query_row = {q: i for i, q in enumerate(queries)}
    corpus_row = {c: i for i, c in enumerate(corpus)}
    own: list[list[int]] = [[] for _ in queries]  # each query's positives (corpus rows), first occurrence order
    for anchor, positive in zip(anchors, positives, strict=True):
        rows = own[query_row[anchor]]
        if corpus_row[positive] not in rows:
            rows.append(corpus_row[positive])
    end = options.window_end(max(map(len, own)))
    if options.range_min >= end:
        raise ConfigError(f"--range-min ({options.range_min}) must be smaller than range_max ({end})")

    q = torch.nn.functional.normalize(embed(queries).float(), dim=-1)
    c = torch.nn.functional.normalize(embed(corpus).float(), dim=-1)
    width = end + max(map(len, own))
    scores, indices = _top_candidates(q, c, min(width, len(corpus)), width)
    scores[indices == -1] = -float("inf")
    for i, rows in enumerate(own):
        scores[i, torch.isin(indices[i], torch.tensor(rows))] = -float("inf")

    if options.absolute_margin is not None or options.relative_margin is not None:
        lowest = torch.stack([(q[i] * c[rows]).sum(-1).min() for i, rows in enumerate(own)]).unsqueeze(1)
        if options.absolute_margin is not None:
            scores[scores + options.absolute_margin > lowest] = -float("inf")
        if options.relative_margin is not None:
            scores[scores > lowest - lowest.abs() * options.relative_margin] = -float("inf")

    ranked, local = torch.topk(scores, k=end, dim=1)
    ranked, chosen = ranked[:, options.range_min:], indices.gather(1, local)[:, options.range_min:]
    if options.sampling == "top":
        ranked, chosen = ranked[:, :options.num_negatives], chosen[:, :options.num_negatives]
    else:
        rng = random.Random(options.seed)
        options_left = (ranked.size(1) - ranked.isinf().sum(1)).clamp(min=options.num_negatives)
        picks = torch.tensor([rng.sample(range(n), k=options.num_negatives) for n in options_left.tolist()])
        ranked, chosen = ranked.gather(1, picks), chosen.gather(1, picks)
        ranked, order = ranked.sort(dim=1, descending=True)
        chosen = chosen.gather(1, order)

    out = Triplets([], [], [])
    for i, rows in enumerate(own):
        negatives = [corpus[j] for j, s in zip(chosen[i].tolist(), ranked[i].tolist(), strict=True)
                     if s != -float("inf")]
        for row in rows:
            for negative in negatives:
                out.anchors.append(queries[i])
                out.positives.append(corpus[row])
                out.negatives.append(negative)
    return out


__all__ = ["MiningOptions", "SAMPLING", "Triplets", "mine_triplets"]
