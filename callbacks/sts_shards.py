"""How the STS callback splits its sentences over DDP ranks and puts the representations back together: equal
shards (sharded strategies such as FSDP hang otherwise), all-gathered and re-interleaved into list order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from sts_lightning.embeddings.scoring.scorer import PairScorer, Representation

PAIR_SCORES = "pair_scores"  # a pair scorer's gathered "representation": one score per pair, in pair order


def shard_for_rank(unique: Sequence, rank: int, world_size: int) -> list:
    """``unique[rank::world_size]`` topped up to the longest shard from rank 0's shard (never this rank's own, which
    ``encode`` would de-duplicate away); ``unshard`` drops those rows again."""
    own = list(unique[rank::world_size])
    longest = math.ceil(len(unique) / world_size)
    filler = [s for s in unique[0::world_size] if rank != 0][: longest - len(own)]
    return own + filler


def unshard(gathered: torch.Tensor, total: int) -> torch.Tensor:
    """Invert the strided sharding: ``gathered`` is ``(world_size, longest, ...)`` -> ``(total, ...)``."""
    world_size = gathered.shape[0]
    full = gathered.new_empty((total, *gathered.shape[2:]))
    for rank in range(world_size):
        count = len(range(rank, total, world_size))
        full[rank::world_size] = gathered[rank, :count]
    return full


def gather_shards(strategy, rep: Representation, device: torch.device, total: int) -> Representation:
    """Collective: every rank's shard of ``rep`` all-gathered into the full representation (list order, CPU)."""
    full: Representation = {}
    for key in sorted(rep):  # same key order on every rank: the collectives must line up
        # NCCL needs tensors on the rank's device; gloo is happy with either.
        gathered = strategy.all_gather(rep[key].contiguous().to(device))
        full[key] = unshard(gathered.cpu(), total)
    return full


def gather_pair_scores(strategy, scorer: PairScorer, sentences1: Sequence[str], sentences2: Sequence[str],
                       rank: int, world_size: int, device: torch.device) -> Representation:
    """Collective: this rank scores its shard of the PAIRS (a pair scorer reads both sentences at once, so pairs,
    not sentences, are what is split), the shards all-gathered back into pair order (CPU)."""
    index = shard_for_rank(range(len(sentences1)), rank, world_size)
    scores = scorer.score_pairs([sentences1[i] for i in index], [sentences2[i] for i in index]).float()
    if world_size == 1:
        return {PAIR_SCORES: scores.cpu()}
    return gather_shards(strategy, {PAIR_SCORES: scores}, device, len(sentences1))
