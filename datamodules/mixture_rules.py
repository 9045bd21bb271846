"""The rules of a multi-source training mixture, without torch: option checks and each source's batch count.

``check_mixture`` runs before torch is imported and in the DataModules' constructors: one message wherever a value
is set. The rules are sentence-transformers' ``MultiDatasetBatchSamplers``: ``proportional`` (every batch from one
source, all rows once an epoch, random order) and ``round_robin`` (one batch of each in turn until the smallest is
spent); ours adds ``data.mixture_weights``, ``proportional``'s shares of the epoch's batches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sts_lightning.embeddings.errors import ConfigError, unknown_choice

RULES = ("proportional", "round_robin")


@dataclass(frozen=True)
class MixtureOptions:
    """Checked mixture options: ``rule`` (``None``: the sources pooled), ``weights`` and ``no_duplicates``."""

    rule: str | None = None
    weights: tuple[float, ...] | None = None
    no_duplicates: bool = False

    @property
    def batch_sampled(self) -> bool:
        """Whether batches are built by ``datamodules.mixture`` (else the pooled, shuffled loader of before)."""
        return self.rule is not None or self.no_duplicates


def check_mixture(sources: Sequence[str], mixture: str | None, weights: Sequence[float] | None,
                  no_duplicates: bool) -> MixtureOptions:
    """One ``ConfigError`` line naming the ``data.*`` key of a bad value, else the options as ``MixtureOptions``."""
    if mixture is not None and mixture not in RULES:
        raise unknown_choice("data.mixture", mixture, [*RULES, "null"])
    if not isinstance(no_duplicates, bool):
        raise ConfigError(f"data.no_duplicates={no_duplicates!r} is not allowed: it must be true or false")
    if mixture is not None and len(sources) < 2:
        raise ConfigError(f"data.mixture={mixture} mixes two or more data.sources, but there is one "
                          f"({', '.join(map(str, sources))}): drop data.mixture (null) or add a source")
    if weights is None:
        return MixtureOptions(mixture, None, no_duplicates)
    if mixture != "proportional":
        raise ConfigError(f"data.mixture_weights applies to data.mixture=proportional only (data.mixture={mixture}): "
                          "set data.mixture=proportional or data.mixture_weights=null")
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
        raise ConfigError(f"data.mixture_weights={weights!r} is not allowed: it must be a list, one weight per source")
    if len(weights) != len(sources):
        raise ConfigError(f"data.mixture_weights has {len(weights)} weight(s) for {len(sources)} data.sources: "
                          "give one weight per source, or data.mixture_weights=null (shares by size)")
    for i, weight in enumerate(weights):
        number = isinstance(weight, (int, float)) and not isinstance(weight, bool)
        if not (number and math.isfinite(weight) and weight > 0):
            raise ConfigError(f"data.mixture_weights[{i}]={weight!r} is not allowed: it must be a number > 0")
    return MixtureOptions(mixture, tuple(float(w) for w in weights), no_duplicates)


def check_source_sizes(sizes: Mapping[str, int], batch_size: int) -> None:
    """With one-source batches every source must fill one global batch: else one line naming the source."""
    for name, rows in sizes.items():
        if rows < batch_size:
            raise ConfigError(f"data.batch_size={batch_size} is larger than source {name} ({rows} rows): with "
                              "data.mixture every batch comes from one source; lower data.batch_size or drop it")


def batches_of(rows: int, batch_size: int, drop_last: bool) -> int:
    """Batches one pass over ``rows`` fills (sentence-transformers' ``len`` of a source's batch sampler)."""
    return rows // batch_size if drop_last else -(-rows // batch_size)


def batch_slots(sizes: Sequence[int], batch_size: int, drop_last: bool, rule: str | None,
                weights: Sequence[float] | None = None) -> list[int]:
    """The number of batches each source gives an epoch: its own count, or (``proportional``) that total shared
    out by ``weights`` (largest remainders); ``round_robin``: the smallest source's count for every source."""
    own = [batches_of(n, batch_size, drop_last) for n in sizes]
    if rule == "round_robin":
        return [min(own)] * len(own)
    if weights is None:
        return own
    total, weight_sum = sum(own), float(sum(weights))
    exact = [total * w / weight_sum for w in weights]
    slots = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: (slots[i] - exact[i], i))
    for i in by_remainder[: total - sum(slots)]:
        slots[i] += 1
    return slots
