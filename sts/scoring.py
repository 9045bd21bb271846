"""Correlations and their aggregation over subsets, and scoring a ``Scorer`` on many tasks at once.

Per task (x100): ``all``, one correlation over the pooled pairs (SimCSE / SBERT; our STS12-16 number); ``mean`` over
subsets; ``wmean`` weighted by subset size (SentEval). A ``Bootstrap`` adds ``spearman_ci`` (``sts.bootstrap``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr

from sts_lightning.embeddings.scoring.scorer import Scorer, take
from sts_lightning.sts.bootstrap import Bootstrap, spearman_interval
from sts_lightning.sts.geometry import tasks_geometry
from sts_lightning.sts.tasks import STSTask

MAIN_AGGREGATE = "all"


def correlations(predicted: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Spearman and Pearson x100. Constant predictions give NaN (no ranking), reported as such."""
    predicted, gold = np.asarray(predicted, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if predicted.shape != gold.shape:
        raise ValueError(f"{predicted.shape[0]} predictions for {gold.shape[0]} gold scores")
    if np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        return {"spearman": float("nan"), "pearson": float("nan"), "n": int(gold.size)}
    return {"spearman": 100.0 * float(spearmanr(predicted, gold).statistic),
            "pearson": 100.0 * float(pearsonr(predicted, gold).statistic), "n": int(gold.size)}


def with_interval(scores: dict, predicted: np.ndarray, gold: np.ndarray, bootstrap: Bootstrap | None) -> dict:
    """``scores`` plus ``spearman_ci`` when ``bootstrap`` is on and the point estimate is a number."""
    if bootstrap is None or not bootstrap.enabled or not np.isfinite(scores["spearman"]):
        return scores
    return {**scores, "spearman_ci": spearman_interval(predicted, gold, bootstrap)}


def aggregate(task: STSTask, predictions: dict[str, np.ndarray], bootstrap: Bootstrap | None = None) -> dict:
    """Per-subset correlations plus ``all`` / ``mean`` / ``wmean`` for one task (intervals: module docstring)."""
    per = {name: with_interval(correlations(predictions[name], pairs.scores), predictions[name], pairs.scores,
                               bootstrap) for name, pairs in task.subsets.items()}
    pooled_pred = np.concatenate([predictions[n] for n in task.subsets])
    pooled_gold = np.concatenate([p.scores for p in task.subsets.values()])
    sizes = np.array([per[n]["n"] for n in task.subsets], dtype=np.float64)
    out: dict = {"subsets": per, "all": with_interval(correlations(pooled_pred, pooled_gold), pooled_pred,
                                                      pooled_gold, bootstrap)}
    for key in ("spearman", "pearson"):
        vals = np.array([per[n][key] for n in task.subsets])
        out.setdefault("mean", {})[key] = float(vals.mean())
        out.setdefault("wmean", {})[key] = float((vals * sizes).sum() / sizes.sum())
    out["mean"]["n"] = out["wmean"]["n"] = int(sizes.sum())
    return out


def main_score(result: dict, metric: str = "spearman") -> float:
    return float(result[MAIN_AGGREGATE][metric])


def pair_sentences(tasks: Sequence[STSTask]) -> list[str]:
    """Every sentence of ``tasks`` in ``score_tasks``' order, so a shared pass batches as the scorer would."""
    pairs = [p for t in tasks for p in t.subsets.values()]
    return [s for p in pairs for s in p.sentences1] + [s for p in pairs for s in p.sentences2]


def score_tasks(scorer: Scorer, tasks: Sequence[STSTask], bootstrap: Bootstrap | None = None,
                keep: dict[str, dict[str, np.ndarray]] | None = None) -> dict[str, dict]:
    """Every pair of every task in ONE ``score_pairs`` call; ``keep`` gets ``{task: {subset: similarities}}``."""
    s1: list[str] = []
    s2: list[str] = []
    spans: list[tuple[STSTask, str, int, int]] = []
    for task in tasks:
        for name, pairs in task.subsets.items():
            spans.append((task, name, len(s1), len(s1) + len(pairs)))
            s1.extend(pairs.sentences1)
            s2.extend(pairs.sentences2)
    sims, geometry = _similarities_and_geometry(scorer, s1, s2, spans)
    if not np.all(np.isfinite(sims)):
        bad = int((~np.isfinite(sims)).sum())
        raise FloatingPointError(f"scorer {scorer.name!r} produced {bad} non-finite similarities")
    preds: dict[str, dict[str, np.ndarray]] = {}
    for task, name, lo, hi in spans:
        preds.setdefault(task.name, {})[name] = sims[lo:hi]
    if keep is not None:
        keep.update(preds)
    results = {task.name: aggregate(task, preds[task.name], bootstrap) for task in tasks}
    for name, values in geometry.items():
        results[name]["geometry"] = values
    return results


def _similarities_and_geometry(scorer: Scorer, s1: list[str], s2: list[str],
                               spans: list[tuple]) -> tuple[np.ndarray, dict[str, dict]]:
    """``score_pairs``'s similarities, plus alignment / uniformity from the same vectors; a scorer with its own
    ``score_pairs`` (an ensemble, a table) keeps it and gets no geometry."""
    if type(scorer).score_pairs is not Scorer.score_pairs:
        return scorer.score_pairs(s1, s2).cpu().numpy().astype(np.float64), {}
    rep, rows1, rows2 = scorer.represent_pairs(s1, s2)
    sims = scorer.similarity(take(rep, rows1), take(rep, rows2)).float().cpu().numpy().astype(np.float64)
    return sims, tasks_geometry(rep, rows1, rows2, spans)
