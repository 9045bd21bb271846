"""AugSBERT's training data (Thakur et al., NAACL 2021, in-domain): gold scored pairs plus "silver" pairs of the
same sentences, scored by a cross-encoder trained on the gold ones; batches as ``datamodules.scored_pairs`` serves
them, so ``model=cosent`` trains on gold + silver unchanged.

``prepare_data`` (once per node) samples the silver pairs (``datamodules.pair_sampling``: ``semantic`` encodes the
unique sentences with ``sampler``) and labels them with the cross-encoder at ``cross_encoder``; the result is one JSON
file under ``<cache_dir>/augsbert`` named by everything that changes it, so a second run (a seed sweep of the
bi-encoder) pays for neither pass. ``setup`` reads that file on every rank.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from sts_lightning.datamodules.loader import per_device_batch_size
from sts_lightning.datamodules.mixture import describe_mixture
from sts_lightning.datamodules.pair_sampling import (
    STRATEGIES,
    gold_pair_keys,
    new_pairs,
    random_partners,
    semantic_partners,
    unique_sentences,
)
from sts_lightning.datamodules.scored_pair_readers import ScoredPairs, load_scored_source
from sts_lightning.datamodules.scored_pairs import ScoredPairDataset, ScoredPairsDataModule
from sts_lightning.embeddings.console import phase
from sts_lightning.embeddings.encoders.hf import resolve_device
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.errors import ConfigError, DataError, unknown_choice
from sts_lightning.embeddings.io.atomic import atomic_write
from sts_lightning.embeddings.io.cache_root import cache_dir_or_root
from sts_lightning.embeddings.io.fingerprint import model_fingerprint
from sts_lightning.embeddings.io.model_card import DataFacts
from sts_lightning.embeddings.io.npy_cache import key_digest
from sts_lightning.embeddings.methods.cross_encoder.scorer import load_cross_encoder
from sts_lightning.embeddings.methods.pooling import PoolingScorer
from sts_lightning.embeddings.sources.cache import sentences_digest
from sts_lightning.embeddings.stop_request import check_stop, stretch

log = logging.getLogger(__name__)
CACHE_VERSION = 1
LABEL_PART_BATCHES = 16  # cross-encoder batches per call: the scorer sorts a call's pairs by length


def _load_labeller(path: str, batch_size: int, device: str | None):
    """The cross-encoder as a pair scorer (``score_pairs(s1, s2) -> (n,)`` tensor in [0, 1]); the one seam tests
    replace with a fake labeller."""
    return load_cross_encoder(path, batch_size=batch_size, device=device)


def _check_cross_encoder(path: str | None) -> Path:
    if path in (None, ""):
        raise ConfigError("data.cross_encoder is required: the directory of a cross-encoder trained on the gold pairs "
                          "(a model=cross_encoder export), e.g. data.cross_encoder=outputs/<run>/export")
    local = Path(str(path)).expanduser()
    if not local.is_dir():
        raise ConfigError(f"data.cross_encoder={path!r} is not a directory: give a cross-encoder export's folder")
    return local.resolve()


class AugmentedPairsDataModule(ScoredPairsDataModule):
    """Batches ``{"sentences1", "sentences2", "scores"}`` of gold + silver pairs (``silver_only``: silver alone)."""

    def __init__(self, data_dir: str | None = None, sources: Sequence[str] | str = ("stsb:train",),
                 cross_encoder: str | None = None, strategy: str = "semantic", top_k: int = 3,
                 sampler: str = "paraphrase-MiniLM-L3-v2", silver_only: bool = False, label_batch_size: int = 32,
                 encode_device: str = "auto", cache_dir: str | None = None, batch_size: int = 16,
                 num_workers: int = 0, seed: int = 0, shuffle: bool = True, drop_last: bool = False,
                 max_malformed_fraction: float = 0.01, columns: Mapping[str, str] | None = None,
                 score_scale: Sequence[float] | None = None, mixture: str | None = None,
                 mixture_weights: Sequence[float] | None = None, no_duplicates: bool = False):
        if mixture is not None or mixture_weights is not None:  # the base's options, named so a typo is no silent no-op
            raise ConfigError("data.mixture / data.mixture_weights: AugSBERT pools gold and silver pairs in one "
                              "shuffled set (the authors' recipe); leave them null")
        super().__init__(data_dir, sources, batch_size=batch_size, num_workers=num_workers, seed=seed,
                         shuffle=shuffle, drop_last=drop_last, max_malformed_fraction=max_malformed_fraction,
                         columns=columns, score_scale=score_scale, no_duplicates=no_duplicates)
        if strategy not in STRATEGIES:
            raise unknown_choice("data.strategy", strategy, STRATEGIES)
        for name, value in (("top_k", top_k), ("label_batch_size", label_batch_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"data.{name}={value!r} is not allowed: it must be a whole number >= 1")
        self.cross_encoder = _check_cross_encoder(cross_encoder)
        self.strategy, self.top_k, self.sampler = strategy, top_k, str(sampler)
        self.silver_only, self.label_batch_size = bool(silver_only), label_batch_size
        self.encode_device, self.cache_dir = encode_device, cache_dir_or_root(cache_dir)
        self.silver: ScoredPairs | None = None

    def _gold(self) -> dict[str, ScoredPairs]:
        return {spec: load_scored_source(spec, self.data_dir, self.max_bad, self.columns, self.score_scale)
                for spec in self.sources}

    def cache_key(self, gold: Mapping[str, ScoredPairs]) -> dict:
        """What the silver pairs are a function of (plain JSON): the gold pairs, the sampling, the cross-encoder's
        files. The seed only for ``random`` and the sampler only for ``semantic``: neither changes the other."""
        texts = [s for part in gold.values() for pair in zip(part.sentences1, part.sentences2, strict=True) for s in pair]
        key = {"version": CACHE_VERSION, "sources": self.sources, "gold": sentences_digest(texts),
               "gold_pairs": len(texts) // 2, "strategy": self.strategy, "top_k": self.top_k,
               "cross_encoder": model_fingerprint(str(self.cross_encoder))}
        if self.strategy == "random":
            key["seed"] = self.seed
        else:
            key["sampler"] = model_fingerprint(self.sampler)
        return key

    def silver_path(self, key: dict) -> Path:
        return self.cache_dir / "augsbert" / f"silver.{key_digest(key)}.json"

    def prepare_data(self) -> None:
        """Sample and label the silver pairs once, or find them cached; one model loaded at a time."""
        gold = self._gold()
        key = self.cache_key(gold)
        path = self.silver_path(key)
        if read_silver(path, key) is not None:
            log.info("AugSBERT: using cached silver pairs %s (no sampling, no labelling)", path)
            return
        sentences1 = [s for part in gold.values() for s in part.sentences1]
        sentences2 = [s for part in gold.values() for s in part.sentences2]
        sentences = unique_sentences(sentences1, sentences2)
        partners = self._partners(sentences)
        pairs = new_pairs(partners, gold_pair_keys(sentences1, sentences2, sentences))
        if not pairs:
            raise DataError(f"AugSBERT: no silver pairs from {len(sentences)} unique sentences of "
                            f"{', '.join(self.sources)}: every candidate is a gold pair; add sentences or raise data.top_k")
        first, second = [sentences[i] for i, _ in pairs], [sentences[j] for _, j in pairs]
        scores = self._label(first, second)
        atomic_write(path, json.dumps({"key": key, "sentences1": first, "sentences2": second,
                                       "scores": scores}).encode())
        log.info("AugSBERT: %d silver pairs sampled (%s, top_k=%d) and labelled, cached in %s", len(scores),
                 self.strategy, self.top_k, path)

    def _device(self) -> str:
        return str(resolve_device(self.encode_device))

    def _partners(self, sentences: list[str]):
        if self.strategy == "random":
            return random_partners(len(sentences), self.top_k, self.seed)
        check_stop(f"loading AugSBERT sampler {self.sampler}")
        scorer = PoolingScorer(load_encoder(self.sampler, device=self._device()), "mean")
        with phase(f"AugSBERT sampler vectors ({len(sentences):,} sentences)", len(sentences)) as counter, \
                stretch(f"encoding AugSBERT sampler {self.sampler}"), counter.part(len(sentences)):
            vectors = scorer.represent(sentences)["embedding"]
        del scorer
        return semantic_partners(vectors, self.top_k)

    def _label(self, sentences1: list[str], sentences2: list[str]) -> list[float]:
        """Cross-encoder scores in [0, 1], a stop checked between batches (the scorer's loop feeds the phase, and
        every part starts with a check); a score off [0, 1] is refused, as the authors' example asserts."""
        check_stop(f"loading AugSBERT cross-encoder {self.cross_encoder}")
        labeller = _load_labeller(str(self.cross_encoder), self.label_batch_size, self._device())
        n, step = len(sentences1), self.label_batch_size * LABEL_PART_BATCHES
        order = sorted(range(n), key=lambda i: len(sentences1[i]) + len(sentences2[i]))  # similar lengths per call
        scores = [math.nan] * n
        with phase(f"AugSBERT silver labels ({n:,} pairs)", n, unit="pairs") as counter, \
                stretch(f"labelling AugSBERT silver pairs with {self.cross_encoder}"):
            for start in range(0, n, step):
                rows = order[start:start + step]
                with counter.part(len(rows)):
                    out = labeller.score_pairs([sentences1[i] for i in rows], [sentences2[i] for i in rows])
                values = torch.as_tensor(out, dtype=torch.float64).reshape(-1).tolist()
                if len(values) != len(rows) or not all(0.0 <= v <= 1.0 for v in values):
                    raise DataError(f"AugSBERT: the cross-encoder {self.cross_encoder} gave {len(values)} scores for "
                                    f"{len(rows)} pairs, or scores outside [0, 1] (it must end in a sigmoid)")
                for i, value in zip(rows, values, strict=True):
                    scores[i] = value
        return scores

    def setup(self, stage: str | None = None) -> None:
        """Gold pairs read again (cheap) and the silver pairs from ``prepare_data``'s file; no model is loaded."""
        per_device_batch_size(self.batch_size, self.world_size)
        if self.dataset is not None:
            return
        self.parts = self._gold()
        key = self.cache_key(self.parts)
        path = self.silver_path(key)
        self.silver = read_silver(path, key)
        if self.silver is None:
            raise DataError(f"AugSBERT silver pairs {path} are missing or stale: run prepare_data first")
        gold_rows = sum(len(p) for p in self.parts.values())
        self.dataset = ScoredPairDataset([self.silver] if self.silver_only else [*self.parts.values(), self.silver])
        self.source_rows = {"+".join([*self.sources, "silver"]): len(self.dataset)}
        log.info("AugSBERT: %d gold pairs%s + %d silver pairs (%s, top_k=%d) labelled by %s", gold_rows,
                 " (not trained on: silver_only)" if self.silver_only else "", len(self.silver), self.strategy,
                 self.top_k, self.cross_encoder)
        if self.mix.batch_sampled:
            log.info("%s", describe_mixture(self))

    def data_facts(self) -> DataFacts:
        """Gold pairs per source and the silver count, for the model card."""
        facts = super().data_facts()
        if self.silver is None:
            return facts
        per_source = {} if self.silver_only else dict(facts.per_source)
        per_source[f"silver ({self.strategy}, top_k={self.top_k})"] = len(self.silver)
        note = (f"AugSBERT silver pairs: {len(self.silver)} pairs of the gold sentences ({self.strategy} sampling, "
                f"top_k={self.top_k}) scored by the cross-encoder {self.cross_encoder}"
                + ("; trained on the silver pairs alone" if self.silver_only else ""))
        return DataFacts(facts.sources, facts.rows, facts.unit, per_source=per_source, skipped=facts.skipped,
                         notes=(*facts.notes, note))


def read_silver(path: Path, key: dict) -> ScoredPairs | None:
    """The cached silver pairs when the file exists, parses and was made for ``key``; else ``None`` (rebuilt)."""
    if not path.is_file():
        return None
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached["key"] != key:
            return None
        return ScoredPairs(list(cached["sentences1"]), list(cached["sentences2"]), [float(s) for s in cached["scores"]],
                           source=str(path))
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning("AugSBERT silver pairs %s are not usable (%s): rebuilding them", path, err)
        return None
