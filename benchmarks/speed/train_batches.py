"""The batches the training benchmark feeds both sides, and the sentences each step encodes (its useful tokens).

Why its own file: both sides of ``benchmarks/speed/train_speed.py`` must see the same batches, and the MFU of each must be
counted over the same sentences, whatever each engine does with them (pads, packs, de-duplicates). Batch layouts are
those of our DataModules' collate functions (raw sentences; the modules tokenize):

    ct      {"sentences"}: the pool CT draws its pairs from          (SNLI sentences)
    nli     {"sentences1", "sentences2", "labels"}                    (SNLI pairs, softmax over u, v, |u-v|)
    mnrl    {"anchors", "positives", "negatives"}                     (SNLI triplets, in-batch negatives)
    cosent  {"sentences1", "sentences2", "scores"}                    (STS-B train pairs, scores in [0, 1])
    simcse  {"sentences"}: each encoded twice (two dropout views)     (Wikipedia sentences)
    mlm     {"sentences"}: masked-LM rows                             (Wikipedia sentences)
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from sts_lightning.datamodules.nli_readers import load_source
from sts_lightning.datamodules.nli_triplets import build_triplets
from sts_lightning.datamodules.scored_pair_readers import load_scored_source
from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.methods.ct.objective import make_ct_pairs, pair_rng

KINDS = ("ct", "nli", "mnrl", "cosent", "simcse", "mlm")
MLM_PROBABILITY = 0.15  # BERT's share of predicted positions (our MLMModule's and transformers' default)


def wiki_sentences(data_dir, limit: int = 20000, required: bool = False) -> list[str] | None:
    """The first ``limit`` local Wikipedia sentences (SimCSE's kind of data), or ``None`` where the file is missing."""
    path = Path(data_dir or os.environ.get("STS_DATA_DIR", ".")) / "wiki" / "wiki_sentences_100k.txt"
    if not path.is_file():
        if required:
            raise DataError(f"{path}: no Wikipedia sentences (bash benchmarks/gpu/gpu_bundle.sh carries 20,000)")
        return None
    with path.open(encoding="utf-8") as f:
        return [line.strip() for _, line in zip(range(limit), f, strict=False) if line.strip()]


def cycle(items: list, b: int, batch_size: int) -> list:
    return [items[(b * batch_size + j) % len(items)] for j in range(batch_size)]


def make_batches(kind: str, data_dir, nli_source: str, n: int, batch_size: int, wiki: bool = True) -> list[dict]:
    """``n`` batches of ``batch_size`` rows of method ``kind`` (see the module docstring for the sources)."""
    if kind in ("simcse", "mlm") and wiki and (sentences := wiki_sentences(data_dir)):
        return [{"sentences": cycle(sentences, b, batch_size)} for b in range(n)]
    if kind == "cosent":
        pairs = load_scored_source("stsb:train", data_dir)
        rows = list(zip(pairs.sentences1, pairs.sentences2, pairs.scores, strict=True))
        return [{"sentences1": [r[0] for r in chunk], "sentences2": [r[1] for r in chunk],
                 "scores": torch.tensor([r[2] for r in chunk], dtype=torch.float)}
                for chunk in (cycle(rows, b, batch_size) for b in range(n))]
    data = load_source(nli_source, data_dir)
    if kind == "nli":
        rows = list(zip(data.premises, data.hypotheses, data.labels, strict=True))
        return [{"sentences1": [r[0] for r in chunk], "sentences2": [r[1] for r in chunk],
                 "labels": torch.tensor([r[2] for r in chunk], dtype=torch.long)}
                for chunk in (cycle(rows, b, batch_size) for b in range(n))]
    if kind == "mnrl":
        t = build_triplets([data])
        rows = list(zip(t.anchors, t.positives, t.negatives, strict=True))
        return [{"anchors": [r[0] for r in chunk], "positives": [r[1] for r in chunk], "negatives": [r[2] for r in chunk]}
                for chunk in (cycle(rows, b, batch_size) for b in range(n))]
    pool = list(dict.fromkeys([*data.premises, *data.hypotheses]))
    return [{"sentences": cycle(pool, b, batch_size)} for b in range(n)]


def ct_pairs(batch: dict, batch_size: int, seed: int = 0):
    """The (texts1, texts2, labels) CT draws from this pool at step 0 (both sides use the same draw pattern)."""
    return make_ct_pairs(batch["sentences"], pair_rng(seed, 0, 0), batch_size=batch_size, positives=2)


def step_texts(kind: str, batch: dict, batch_size: int) -> list[str]:
    """Every sentence one training step of ``kind`` encodes (with repeats: SimCSE's two views, CT's two models)."""
    if kind == "simcse":
        return [*batch["sentences"], *batch["sentences"]]
    if kind == "mlm":
        return list(batch["sentences"])
    if kind == "ct":
        texts1, texts2, _ = ct_pairs(batch, batch_size)
        return [*texts1, *texts2]
    if kind == "mnrl":
        return [*batch["anchors"], *batch["positives"], *batch["negatives"]]
    return [*batch["sentences1"], *batch["sentences2"]]


def step_lengths(tokenizer, texts: list[str], max_length: int) -> list[int]:
    """Real token counts (special tokens included, truncated at ``max_length``) of ``texts``."""
    ids = tokenizer(list(texts), truncation=True, max_length=max_length, add_special_tokens=True,
                    return_attention_mask=False, return_token_type_ids=False)["input_ids"]
    return [len(x) for x in ids]


def predicted_positions(kind: str, lengths: list[int]) -> float:
    """Expected masked-LM predictions of a step: 15% of the non-special tokens (two per sentence), MLM only."""
    return MLM_PROBABILITY * sum(max(n - 2, 0) for n in lengths) if kind == "mlm" else 0.0
