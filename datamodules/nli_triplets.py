"""(premise, entailed hypothesis, contradicted hypothesis) triplets from labelled NLI pairs.

The input of the in-batch-negatives NLI objective (``model.objective=mnrl``, sentence-transformers'
``training_nli_v2.py`` recipe): the premise is the anchor, an entailed hypothesis the positive and a
contradicted hypothesis of the SAME premise a hard negative. Neutral pairs are not used. A premise with an
entailment but no contradiction yields no triplet; such entailments are counted (``without_negative``),
not silently turned into triplets with a made-up negative.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch.utils.data import Dataset

from datamodules.nli_readers import LABELS, NLIPairs
from embeddings.errors import DataError


@dataclass
class NLITriplets:
    anchors: list[str]
    positives: list[str]
    negatives: list[str]
    without_negative: int = 0  # entailment pairs whose premise has no contradiction (not used)

    def __len__(self) -> int:
        return len(self.anchors)


def build_triplets(parts: Sequence[NLIPairs]) -> NLITriplets:
    """One triplet per (premise, entailed hypothesis); contradictions of that premise are used in turn.

    Deterministic (input order), so the dataset, and hence a resumed epoch, is the same on every rank.
    """
    entailed: dict[str, list[str]] = {}
    contradicted: dict[str, list[str]] = {}
    for part in parts:
        for premise, hypothesis, label in zip(part.premises, part.hypotheses, part.labels, strict=True):
            if label == LABELS["entailment"]:
                entailed.setdefault(premise, []).append(hypothesis)
            elif label == LABELS["contradiction"]:
                contradicted.setdefault(premise, []).append(hypothesis)
    out = NLITriplets([], [], [])
    for premise, positives in entailed.items():
        negatives = contradicted.get(premise)
        if not negatives:
            out.without_negative += len(positives)
            continue
        for i, positive in enumerate(positives):
            out.anchors.append(premise)
            out.positives.append(positive)
            out.negatives.append(negatives[i % len(negatives)])
    if not out.anchors:
        raise DataError("no NLI triplets: no premise has both an entailed and a contradicted hypothesis "
                        f"({out.without_negative} entailment pairs without a contradiction); use data.format=pairs")
    return out


class NLITripletDataset(Dataset):
    """Map-style triplets, so Lightning can shard it with a DistributedSampler like the pair dataset."""

    def __init__(self, triplets: NLITriplets):
        self.triplets = triplets

    def __len__(self) -> int:
        return len(self.triplets)

    def __getitem__(self, i: int) -> tuple[str, str, str]:
        t = self.triplets
        return t.anchors[i], t.positives[i], t.negatives[i]


def collate_triplets(rows: Sequence[tuple[str, str, str]]) -> dict[str, list[str]]:
    """Raw strings: the LightningModule tokenizes (the encoder owns its tokenizer)."""
    return {"anchors": [r[0] for r in rows], "positives": [r[1] for r in rows], "negatives": [r[2] for r in rows]}


__all__ = ["NLITripletDataset", "NLITriplets", "build_triplets", "collate_triplets"]
