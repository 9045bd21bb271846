"""How much a student's in-batch similarity lists already agree with RankCSE's teachers', over the whole list and
at its head: what ListMLE and ListNet each have left to teach.

Why: RankCSE's two variants swap order with the backbone. ListMLE learns the teachers' whole order, ListNet
(``softmax(teacher / tau2)``) weighs its head more; so per backbone: how far is the student from the teachers over
the whole list and at the head, against how far the teachers are from each other? The batches are the first ones
``python train.py model=rankcse`` trains on (batch 128); the student's vectors are its [CLS], no dropout. Per anchor:
``spearman`` with the teachers' combined list and with each teacher (and teacher with teacher), ``head overlap`` of
the top-k (k = 8), and ``listnet head mass`` (the share of ListNet's target on the teachers' top-k).

    python -m benchmarks.studies.rankcse_list_agreement <student> [--batches 8] [--teachers all-MiniLM-L6-v2 multilingual-e5-small]
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

import sts_lightning as sl
from benchmarks.tools.cpu_features import cpu_line
from sts_lightning.datamodules.distillation import DistillationDataModule
from sts_lightning.embeddings.methods.rankcse.objective import teacher_scores

ROOT = Path(__file__).resolve().parents[2]
TEACHERS = ("all-MiniLM-L6-v2", "multilingual-e5-small")  # configs/model/rankcse.yaml
WEIGHTS = (0.33, 0.67)
TAU2 = 0.05
HEAD = 8


def _off_diagonal(scores: torch.Tensor) -> torch.Tensor:
    """``(B, B)`` -> ``(B, B - 1)``: each anchor's list without its own column (RankCSE's lists compare candidates)."""
    n = scores.shape[0]
    keep = ~torch.eye(n, dtype=torch.bool, device=scores.device)
    return scores[keep].view(n, n - 1)


def _cosines(vectors: torch.Tensor) -> torch.Tensor:
    unit = F.normalize(vectors.float(), dim=-1)
    return unit @ unit.T


def _row_spearman(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Spearman of each row of ``a`` with the same row of ``b`` (no ties in float similarities)."""
    ra, rb = (x.argsort(dim=1).argsort(dim=1).float() for x in (a, b))
    ra, rb = ra - ra.mean(dim=1, keepdim=True), rb - rb.mean(dim=1, keepdim=True)
    return (ra * rb).sum(dim=1) / (ra.norm(dim=1) * rb.norm(dim=1))


def _head_overlap(a: torch.Tensor, b: torch.Tensor, k: int) -> torch.Tensor:
    """Per row: share of ``b``'s top-``k`` columns that are in ``a``'s top-``k``."""
    top_a, top_b = a.topk(k, dim=1).indices, b.topk(k, dim=1).indices
    return (top_a.unsqueeze(2) == top_b.unsqueeze(1)).any(dim=1).float().mean(dim=1)


def batch_agreement(student: torch.Tensor, teachers: Sequence[torch.Tensor], weights: Sequence[float] = WEIGHTS,
                    tau2: float = TAU2, head: int = HEAD) -> dict[str, float]:
    """One batch: the student's (``(B, d)``) and each teacher's (``(B, d_k)``) vectors of the same sentences.

    Returns the means over anchors of ``student_spearman`` / ``student_head`` (student vs the teachers' combined
    list, as RankCSE combines it), ``student_spearman_<k>`` (student vs teacher k alone), ``teachers_spearman`` /
    ``teachers_head`` (first teacher vs second; only with two or more teachers) and ``listnet_head_mass``.
    """
    combined = _off_diagonal(teacher_scores(list(teachers), list(weights), tau2))
    mine = _off_diagonal(_cosines(student))
    out = {"student_spearman": _row_spearman(mine, combined).mean().item(),
           "student_head": _head_overlap(mine, combined, head).mean().item(),
           "listnet_head_mass": F.softmax(combined, dim=1).topk(head, dim=1).values.sum(dim=1).mean().item()}
    own_lists = [_off_diagonal(_cosines(t)) for t in teachers]
    for k, listed in enumerate(own_lists):
        out[f"student_spearman_{k}"] = _row_spearman(mine, listed).mean().item()
    if len(own_lists) > 1:
        first, second = own_lists[:2]
        out["teachers_spearman"] = _row_spearman(second, first).mean().item()
        out["teachers_head"] = _head_overlap(second, first, head).mean().item()
    return out


def training_batches(data_dir: str, batches: int, teachers: Sequence[str] = TEACHERS, batch_size: int = 128,
                     max_sentences: int = 8000, files: Sequence[str] = ("wiki/wiki_sentences_100k.txt",),
                     cache_dir: str | None = None):
    """The first ``batches`` batches ``model=rankcse`` trains on: ``{"sentences", "teachers"}`` (teachers cached once,
    in the cache ``train.py`` uses, so a warm one is read back)."""
    data = DistillationDataModule(data_dir, files=list(files), teachers=list(teachers), max_sentences=max_sentences,
                                  batch_size=batch_size, combine="each", cache_dir=cache_dir)
    data.prepare_data()
    data.setup("fit")
    for i, batch in enumerate(data.train_dataloader()):
        if i == batches:
            break
        yield batch


def measure(student: str, data_dir: str, batches: int = 8, teachers: Sequence[str] = TEACHERS,
            weights: Sequence[float] = WEIGHTS, batch_size: int = 128, max_sentences: int = 8000,
            head: int = HEAD, cache_dir: str | None = None) -> dict[str, float]:
    """``batch_agreement`` averaged over the first ``batches`` training batches."""
    model = sl.load(student, scorer="cls")
    rows = []
    for batch in training_batches(data_dir, batches, teachers, batch_size, max_sentences, cache_dir=cache_dir):
        vectors = model.encode(batch["sentences"])
        vectors = vectors if torch.is_tensor(vectors) else torch.as_tensor(vectors)
        rows.append(batch_agreement(vectors, batch["teachers"], weights, TAU2, head))
    return {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]}


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("student", help="the student's starting model: packaged name, directory or export")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--teachers", nargs="+", default=list(TEACHERS))
    parser.add_argument("--weights", nargs="+", type=float, default=list(WEIGHTS))
    parser.add_argument("--data-dir", default=os.environ.get("STS_DATA_DIR", str(ROOT.parent / "shared" / "data")))
    args = parser.parse_args(argv)
    if len(args.weights) != len(args.teachers):
        parser.error(f"--weights: {len(args.weights)} weights for {len(args.teachers)} teachers")
    print(f"{args.student}: {args.batches} batches of 128 of model=rankcse's data; teachers {args.teachers}; "
          f"{cpu_line()}", flush=True)
    result = measure(args.student, args.data_dir, args.batches, args.teachers, args.weights)
    print(f"  student vs teachers: spearman {result['student_spearman']:.3f}, top-{HEAD} overlap "
          f"{result['student_head']:.3f}")
    for k, name in enumerate(args.teachers):
        print(f"  student vs {name}: spearman {result[f'student_spearman_{k}']:.3f}")
    if "teachers_spearman" in result:
        print(f"  teacher vs teacher:  spearman {result['teachers_spearman']:.3f}, top-{HEAD} overlap "
              f"{result['teachers_head']:.3f}")
    print(f"  ListNet target mass on the teachers' top-{HEAD}: {result['listnet_head_mass']:.3f}")
    return result


if __name__ == "__main__":
    main()
