"""Seconds from SIGTERM to exit in every phase of ``python train.py experiment=quickstart``, and a resume that ends
equal to the uninterrupted run.

    STS_DATA_DIR=/work/shared/data python -m benchmarks.reliability.signal_phases [--out outputs/signal_phases] [--steps 30]
        [--val-every 15] [--delay 3] [--skip-flow | --skip-chain]

Why a chain: one run stopped in every phase in turn (``CHAIN``: the STS scoring before training, a validation, the
end scoring, the export, then no signal), each stop resumed by the next process with ``ckpt_path=last``, must end
with the same weights, STS table and export as a run never stopped. Then, unless skipped: ``model=flow`` stopped in
its feature caching and resumed, and the phases before step 1 that encode other models (``TEACHER_ROWS``; ``--rows``
picks some), each expected to end within 10 s. Each stage runs through ``tests/runs/fault_driver.py``, whose
``FAULT_PAUSE`` marks when the phase's first stop check runs; the signal follows ``--delay`` s later. The table and
the comparison are printed and written to ``<out>/signal_phases.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.tools.cpu_features import cpu_line
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint
from sts_lightning.embeddings.io.export_manifest import MANIFEST_FILE
from sts_lightning.embeddings.io.model_card import CARD_FILE, WALL_TIME

ROOT = Path(__file__).resolve().parents[2]
DRIVER = [sys.executable, "-m", "tests.runs.fault_driver", "--script", "train.py"]
# (label, phase, evaluation number in that process, held at the check until the signal)
CHAIN = [("STS scoring before training", "scoring STS", 1, False),
         ("validation mid-training", "scoring STS", 2, False),
         ("end scoring", "scoring STS", 2, False),
         ("export", "writing the export", 1, True)]
# key: (label, train.py overrides, the stretch the SIGTERM lands in); each on an empty cache
TEACHER_ROWS = {
    "sed-minilm": ("SED teacher all-MiniLM-L6-v2", ["model=sed"], "encoding SED teacher all-MiniLM-L6-v2"),
    "sed-e5": ("SED teacher multilingual-e5-small", ["model=sed"], "encoding SED teacher multilingual-e5-small"),
    "rankcse-minilm": ("RankCSE teacher all-MiniLM-L6-v2", ["model=rankcse"],
                       "encoding RankCSE teacher all-MiniLM-L6-v2"),
    "rankcse-e5": ("RankCSE teacher multilingual-e5-small", ["model=rankcse"],
                   "encoding RankCSE teacher multilingual-e5-small"),
    "views": ("cross-view AE source all-MiniLM-L6-v2", ["model=cross_view_ae"],
              "encoding cross-view AE source all-MiniLM-L6-v2"),
}
FLOW_MODEL = "paraphrase-MiniLM-L3-v2"  # packaged, small: its 20k-sentence feature cache takes about a minute on 2 cores


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(ROOT), **extra}


def stop_once(cmd: list[str], phase: str, n: int, held: bool, delay: float, log: Path, markers: Path,
              env: dict[str, str] | None = None) -> tuple[float | None, int]:
    """Run ``cmd`` and SIGTERM it ``delay`` s after it entered ``phase``: (seconds from signal to exit, exit code);
    ``None`` seconds when it ended before the signal."""
    shutil.rmtree(markers, ignore_errors=True)
    spec = f"{phase}:{n}:{'0' if held else ''}"
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                env={**(env or _env()), "FAULT_PAUSE": spec, "FAULT_PAUSE_DIR": str(markers)})
    while not (markers / "rank0.pid").is_file():
        if proc.poll() is not None:
            return None, proc.returncode
        time.sleep(0.05)
    if not held:
        time.sleep(delay)
    if proc.poll() is not None:
        return None, proc.returncode
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait()
    return time.monotonic() - sent, code


def checkpoint_step(run: Path) -> int | None:
    last = run / "checkpoints" / "last.ckpt"
    return int(load_checkpoint(last)["global_step"]) if last.is_file() else None


def final_state(run: Path) -> dict:
    """Weights of the final ``last.ckpt``, the STS table, the export's checksums and its card (wall time masked)."""
    manifest = json.loads((run / "export" / MANIFEST_FILE).read_text())["files"]
    manifest.pop(CARD_FILE, None)
    card = [line for line in (run / "export" / CARD_FILE).read_text().splitlines() if not line.startswith(WALL_TIME)]
    return {"step": checkpoint_step(run), "state": load_checkpoint(run / "checkpoints" / "last.ckpt")["state_dict"],
            "table": (run / "sts_before_after.md").read_text(), "export": manifest, "card": card}


def compare(a: dict, b: dict) -> dict[str, bool]:
    same_keys = a["state"].keys() == b["state"].keys()
    return {"step": a["step"] == b["step"],
            "weights": same_keys and all(torch.equal(a["state"][k], b["state"][k]) for k in a["state"]),
            "STS table": a["table"] == b["table"], "export files": a["export"] == b["export"],
            "model card": a["card"] == b["card"]}


def table(rows: list[tuple[str, float | None, int, int | None]]) -> str:
    lines = ["| phase | seconds from SIGTERM to exit | exit code | last.ckpt step |", "|---|---|---|---|"]
    for label, seconds, code, step in rows:
        shown = f"{seconds:.1f}" if seconds is not None else "ended before the signal"
        lines.append(f"| {label} | {shown} | {code} | {step if step is not None else 'none'} |")
    return "\n".join(lines)


def quickstart_chain(out: Path, steps: int, val_every: int, delay: float,
                     plain: Path | None = None) -> tuple[list, dict[str, bool]]:
    """``plain``: an uninterrupted run of the same command to compare with (default: run one now)."""
    common = ["experiment=quickstart", f"trainer.max_steps={steps}", f"+trainer.val_check_interval={val_every}"]
    if plain is None:
        plain = out / "uninterrupted"
        with (out / "uninterrupted.log").open("w") as fh:
            code = subprocess.run([sys.executable, "train.py", *common, f"hydra.run.dir={plain}"], cwd=ROOT,
                                  env=_env(), stdout=fh, stderr=subprocess.STDOUT).returncode
        if code != 0:
            raise SystemExit(f"the uninterrupted run failed (exit {code}): {out / 'uninterrupted.log'}")
    chain, rows = out / "chain", []
    for i, (label, phase, n, held) in enumerate(CHAIN):
        cmd = [*DRIVER, *common, f"hydra.run.dir={chain}", *(["ckpt_path=last"] if i else [])]
        seconds, code = stop_once(cmd, phase, n, held, delay, out / f"stage{i + 1}.log", out / "markers")
        rows.append((label, seconds, code, checkpoint_step(chain)))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    with (out / "stage5.log").open("w") as fh:
        code = subprocess.run([*DRIVER, *common, f"hydra.run.dir={chain}", "ckpt_path=last"], cwd=ROOT, env=_env(),
                              stdout=fh, stderr=subprocess.STDOUT).returncode
    if code != 0:
        raise SystemExit(f"the last resume failed (exit {code}): {out / 'stage5.log'}")
    return rows, compare(final_state(plain), final_state(chain))


def flow_cache(out: Path, delay: float) -> tuple[tuple, int, list[str]]:
    """The flow row, the exit code of the run after it, and what the cache folder holds then."""
    with tempfile.TemporaryDirectory(prefix="flow-cache-") as cache:
        run = out / "flow"
        cmd = [*DRIVER, "model=flow", f"model.model_name_or_path={FLOW_MODEL}", "trainer.max_steps=5", "export=false",
               f"data.cache_dir={cache}", f"hydra.run.dir={run}"]
        seconds, code = stop_once(cmd, "caching features", 1, False, delay, out / "flow.log", out / "markers")
        row = ("flow: caching features (empty cache)", seconds, code, checkpoint_step(run))
        with (out / "flow_again.log").open("w") as fh:
            again = subprocess.run([*cmd, "ckpt_path=last"], cwd=ROOT, env=_env(), stdout=fh,
                                   stderr=subprocess.STDOUT).returncode
        files = sorted(p.name for p in (Path(cache) / "features").iterdir())
    return row, again, files


def stopped_line(log: Path) -> str:
    """The run's ``stopped: ...`` line (empty when it printed none)."""
    return next((line for line in log.read_text(errors="replace").splitlines() if line.startswith("stopped: ")), "")


def teacher_rows(out: Path, keys: list[str], delay: float) -> tuple[list, list[str]]:
    """One row per ``TEACHER_ROWS`` key, and each run's ``stopped:`` line (up to its first ';')."""
    rows, lines = [], []
    for key in keys:
        label, overrides, where = TEACHER_ROWS[key]
        with tempfile.TemporaryDirectory(prefix="teacher-cache-") as cache:
            cmd = [*DRIVER, *overrides, "trainer.max_steps=1", "export=false", f"hydra.run.dir={out / key}"]
            log = out / f"{key}.log"
            seconds, code = stop_once(cmd, where, 1, False, delay, log, out / "markers", _env(STS_CACHE_DIR=cache))
        line = stopped_line(log)
        named = f"while {where}" in line
        rows.append((f"{label} (empty cache){'' if named else ': stopped line does NOT name it'}", seconds, code,
                     checkpoint_step(out / key)))
        lines.append(f"{label}: {line.split(';')[0] or '(no stopped: line)'}")
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    return rows, lines


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="outputs/signal_phases")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--val-every", type=int, default=15)
    parser.add_argument("--delay", type=float, default=3.0, help="seconds into a phase before the SIGTERM")
    parser.add_argument("--skip-flow", action="store_true")
    parser.add_argument("--skip-chain", action="store_true", help="only the flow cache case")
    parser.add_argument("--skip-teachers", action="store_true", help="not the teacher / source rows")
    parser.add_argument("--rows", default=",".join(TEACHER_ROWS),
                        help=f"teacher / source rows, comma-separated among {', '.join(TEACHER_ROWS)}")
    parser.add_argument("--uninterrupted", default=None, help="an uninterrupted run of the same command (its dir)")
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.rows.split(",") if k.strip()]
    unknown = [k for k in keys if k not in TEACHER_ROWS]
    if unknown:
        parser.error(f"--rows: unknown {', '.join(unknown)} (choose among {', '.join(TEACHER_ROWS)})")
    out = Path(args.out).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    report = [cpu_line()]
    if not args.skip_chain:
        plain = Path(args.uninterrupted).resolve() if args.uninterrupted else None
        rows, same = quickstart_chain(out, args.steps, args.val_every, args.delay, plain)
        report += ["", table(rows), "", "resumed chain vs. uninterrupted run: " + ", ".join(
            f"{k} {'equal' if v else 'DIFFER'}" for k, v in same.items())]
    if not args.skip_flow:
        row, again, files = flow_cache(out, args.delay)
        report += ["", table([row]), "", f"the same command with ckpt_path=last: exit {again}; cache folder: {files}"]
    if not args.skip_teachers and keys:
        rows, lines = teacher_rows(out, keys, args.delay)
        report += ["", table(rows), "", *lines]
    text = "\n".join(report) + "\n"
    (out / "signal_phases.md").write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
