"""Wall time of ``python train.py model=X trainer.max_steps=1`` for every model, each on a cold cache.

    python -m benchmarks.speed.time_to_first_step [--models ct,flow] [--out outputs/first_step]

Why: a new user's first command is ``python train.py model=X``; if it spends ten minutes encoding before its
first step (the cross-view AE did, on a cold cache), the user assumes it hangs. Each model runs as a user runs
it -- a fresh process, its own defaults, ``STS_CACHE_DIR`` pointing at an empty directory so nothing cached by
an earlier run helps -- with one optimizer step, so the time is imports + data preparation + the STS scoring
before training + one step + the final scoring and export. The table (model, wall seconds, exit code, and from
the run's own log the estimate printed before the work and the measured time when step 1 started:
``runs.first_step``) is printed and written to ``<out>/first_step.md``; the CPU it ran on heads it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.tools.cpu_features import cpu_line
from sts_lightning.embeddings.methods.registry import trained_methods

ROOT = Path(__file__).resolve().parents[2]
LIMIT_S = 180  # the bound: every model reaches its first step within 3 minutes on 2 cores


def all_models() -> list[str]:
    """Every ``train.py model=<name>``: the declared trained methods (``embeddings.methods.registry``)."""
    return [m.name for m in trained_methods()]


def time_one(model: str, out: Path, timeout_s: float) -> tuple[float, int]:
    """Seconds and exit code of one cold-cache run (``-9`` when it ran past ``timeout_s``)."""
    run_dir = out / model
    with tempfile.TemporaryDirectory(prefix="cold-cache-") as cache:
        env = {**os.environ, "STS_CACHE_DIR": cache, "WANDB_MODE": "disabled"}
        start = time.perf_counter()
        with (out / f"{model}.log").open("w") as log:
            try:
                done = subprocess.run([sys.executable, "train.py", f"model={model}", "trainer.max_steps=1",
                                       f"hydra.run.dir={run_dir}"], cwd=ROOT, env=env, stdout=log,
                                      stderr=subprocess.STDOUT, timeout=timeout_s)
                code = done.returncode
            except subprocess.TimeoutExpired:
                code = -9
        return time.perf_counter() - start, code


def first_step_times(log_text: str) -> tuple[str, str]:
    """(the estimate, the measured time at step 1 since launch) as the run logged them, ``-`` when absent."""
    estimate = re.search(r"before step 1: .*: ~(\d+m\d\ds) in all", log_text)
    measured = re.search(r"step 1 starts (\d+m\d\ds) after launch", log_text)
    return (estimate.group(1) if estimate else "-"), (measured.group(1) if measured else "-")


def main(argv: list[str] | None = None) -> list[tuple[str, float, int]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=None, help="comma-separated model configs (default: all)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before a run is stopped")
    parser.add_argument("--out", default="outputs/first_step")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    models = args.models.split(",") if args.models else all_models()
    print(f"time to first step, cold cache, trainer.max_steps=1; {cpu_line()}", flush=True)
    rows = []
    for model in models:
        seconds, code = time_one(model, out, args.timeout)
        rows.append((model, seconds, code))
        print(f"{model}: {seconds:.0f} s (exit {code})", flush=True)
    lines = [f"{cpu_line()}", "", "| model | wall (s) | under 3 min | exit | estimated before step 1 | step 1 at |",
             "|---|---|---|---|---|---|"]
    for m, s, c in rows:
        estimate, measured = first_step_times((out / f"{m}.log").read_text(errors="replace"))
        lines.append(f"| {m} | {s:.0f} | {'yes' if s <= LIMIT_S and c == 0 else 'no'} | {c} | {estimate} | {measured} |")
    (out / "first_step.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return rows


if __name__ == "__main__":
    main()
