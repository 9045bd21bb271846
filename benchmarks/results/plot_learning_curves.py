"""Plot an STS metric against the training step for one or more run directories (CSV logger output).

Why: "did it learn?" is a curve, not a number; this reads ``<run>/csv/metrics.csv`` (Lightning's
CSVLogger, step 0 = the STS callback's ``eval_at_start``) and draws every run on one axis.

    python -m benchmarks.results.plot_learning_curves --out docs/scratch_learning_curve.png \
        "SBERT-NLI (mnrl)=/work/results/i3b/scratch_nli" "CT=/work/results/scratch_ct"
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path


def read_curve(run: Path, metric: str) -> list[tuple[int, float]]:
    """``(step, value)`` rows of ``metric`` in ``run``'s CSV log, first value per step."""
    files = sorted(run.glob("**/metrics.csv"))
    if not files:
        raise SystemExit(f"no metrics.csv under {run}")
    seen: dict[int, float] = {}
    with open(files[0], newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get(metric):
                seen.setdefault(int(row["step"]), float(row[metric]))  # the STS callback logs x100
    return sorted(seen.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="LABEL=RUN_DIR")
    parser.add_argument("--metric", default="val/stsb-dev_spearman")
    parser.add_argument("--out", required=True)
    parser.add_argument("--title", default="STS-B dev Spearman during training")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    for spec in args.runs:
        label, _, run = spec.rpartition("=")  # labels may contain "="
        curve = read_curve(Path(run), args.metric)
        ax.plot([s for s, _ in curve], [v for _, v in curve], marker="o", label=label)
        print(label, " ".join(f"{s}:{v:.2f}" for s, v in curve))
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(f"{args.metric} x 100")
    ax.set_title(args.title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")  # outside: curves stay visible
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
