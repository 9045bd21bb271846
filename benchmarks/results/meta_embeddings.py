"""Sentence meta-embeddings on our ensemble (Poerner et al. 2020, Tables 1-3) in one process.

Every source encodes the fitting corpus (One Billion Word, < 60 words) and the STS sentences once
(cached, ``benchmarks.results.ensemble_data``); then each single source, the standardised-cosine average, conc,
avg, SVD, GCCA (a tau sweep) and the cross-view AE (loss x depth) are scored through the same
``MetaEmbeddingScorer`` that ``evaluate.py`` loads from an export. ``--ablation`` repeats SVD / GCCA / AE
with each source left out (paper Table 3).

    python -m benchmarks.results.meta_embeddings --data-dir ../shared/data --out results/meta.json [--ablation]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402

from benchmarks.results.ensemble_data import (  # noqa: E402
    ENSEMBLE,
    SHORT,
    LookupSource,
    fitting_sentences,
    source_vectors,
    sts_tasks,
    task_sentences,
)
from sts_lightning.embeddings.methods.meta.projections import fit_meta  # noqa: E402
from sts_lightning.embeddings.methods.meta.scorer import MetaEmbeddingScorer, StandardisedCosineEnsemble  # noqa: E402
from sts_lightning.embeddings.scoring.scorer import VectorScorer  # noqa: E402
from sts_lightning.lightning_modules.cross_view_ae import fit_cross_view_ae  # noqa: E402
from sts_lightning.sts.scoring import main_score, score_tasks  # noqa: E402

log = logging.getLogger(__name__)


class SingleSource(VectorScorer):
    def __init__(self, source: LookupSource) -> None:
        self.source, self.name = source, source.name

    def represent(self, sentences: Sequence[str]) -> dict:
        return {"embedding": self.source.embed(sentences)}


def row(label: str, scorer, tasks, seconds: float = 0.0) -> dict:
    scores = score_tasks(scorer, tasks)
    out = {"method": label, "seconds": round(seconds, 2),
           "tasks": {t: round(main_score(v), 2) for t, v in scores.items()}}
    out["avg"] = round(sum(out["tasks"].values()) / len(out["tasks"]), 2)
    log.info("%-28s %s avg %.2f", label, out["tasks"], out["avg"])
    return out


def evaluate_ensemble(names: Sequence[str], fit_views: dict, sts_sources: dict, tasks, taus: Sequence[float],
                      ae_grid: Sequence[tuple[str, int]], ae_epochs: int, ae_batch: int = 10000,
                      prefix: str = "") -> list[dict]:
    """conc / avg / svd / gcca(tau...) / ae(loss, depth) / standardised cosine average over ``names``."""
    views = [torch.from_numpy(fit_views[n]) for n in names]
    sources = [sts_sources[n] for n in names]
    d = max(v.shape[1] for v in views)
    rows = [row(f"{prefix}avg of standardised cosines", StandardisedCosineEnsemble(sources).fit(views), tasks)]
    for method in ("conc", "avg", "svd"):
        t0 = time.perf_counter()
        proj = fit_meta(method, views, d=d)
        rows.append(row(f"{prefix}{method}", MetaEmbeddingScorer(sources, proj), tasks, time.perf_counter() - t0))
    for tau in taus:
        t0 = time.perf_counter()
        proj = fit_meta("gcca", views, d=d, tau=tau)
        rows.append(row(f"{prefix}gcca tau={tau:g}", MetaEmbeddingScorer(sources, proj), tasks,
                        time.perf_counter() - t0))
    for loss, depth in ae_grid:
        t0 = time.perf_counter()
        proj = fit_cross_view_ae(views, d=d, hidden_layers=depth, loss=loss, epochs=ae_epochs, batch_size=ae_batch)
        rows.append(row(f"{prefix}ae {loss} hidden={depth}", MetaEmbeddingScorer(sources, proj), tasks,
                        time.perf_counter() - t0))
    return rows


def markdown(rows: Sequence[dict]) -> str:
    tasks = list(rows[0]["tasks"])
    lines = ["| method | " + " | ".join(tasks) + " | avg |", "|---" * (len(tasks) + 2) + "|"]
    for r in rows:
        lines.append(f"| {r['method']} | " + " | ".join(f"{r['tasks'][t]:.2f}" for t in tasks) + f" | {r['avg']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--sources", default=",".join(ENSEMBLE))
    parser.add_argument("--max-fit", type=int, default=12000)
    parser.add_argument("--taus", default="0.1,1,10")
    parser.add_argument("--ae", default="mse:0,cos2:0", help="loss:hidden_layers,...")
    parser.add_argument("--ae-epochs", type=int, default=500, help="paper: 500 (of 300k sentences, GPU)")
    parser.add_argument("--ae-batch-size", type=int, default=10000, help="paper: 10,000")
    parser.add_argument("--ablation", action="store_true", help="also leave each source out (Table 3)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default="meta_embeddings.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    names = args.sources.split(",")
    tasks = sts_tasks(args.data_dir)
    sts = task_sentences(tasks)
    fit = fitting_sentences(args.data_dir, max_sentences=args.max_fit, cache_dir=args.cache_dir)
    fit_views = source_vectors(names, fit, args.cache_dir)
    sts_views = source_vectors(names, sts, args.cache_dir)
    sts_sources = {n: LookupSource(SHORT.get(n, n), sts, sts_views[n]) for n in names}
    taus = [float(t) for t in args.taus.split(",")]
    ae_grid = [(x.split(":")[0], int(x.split(":")[1])) for x in args.ae.split(",") if x]
    rows = [row(SHORT.get(n, n), SingleSource(sts_sources[n]), tasks) for n in names]
    rows += evaluate_ensemble(names, fit_views, sts_sources, tasks, taus, ae_grid, args.ae_epochs, args.ae_batch_size)
    if args.ablation:
        for left_out in names:
            rest = [n for n in names if n != left_out]
            rows += evaluate_ensemble(rest, fit_views, sts_sources, tasks, taus, ae_grid[:1], args.ae_epochs,
                                      args.ae_batch_size, prefix=f"without {SHORT.get(left_out, left_out)}: ")
    table = markdown(rows)
    print(table)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"sources": names, "fit_sentences": len(fit), "rows": rows}, indent=1))
    Path(args.out).with_suffix(".md").write_text(table + "\n")


if __name__ == "__main__":
    main()
