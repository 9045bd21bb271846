"""The field's comparison table (SimCSE Table 5's shape) on one backbone, from one command.

    python -m benchmarks.results.field_table --backbone paraphrase-MiniLM-L3-v2 --seeds 0,1,2 --steps 200 --out results/field
    python -m benchmarks.results.field_table --table papers --backbone <export dir> --seeds 0,1,2 --steps N --out <dir>

Every row (``field_rows.py``; the papers table: ``paper_rows.py``, verdicts ``paper_verdicts.py``) runs on the same
backbone and data, as a user would run it: pooling rows and Sen2Pro through ``evaluate.py``, trained rows through
``train.py`` (``--steps`` caps each run) and their export scored as its ``LOADING.md`` says. Why subprocesses: each
run is a fresh process, and a failing row is reported in its cell without stopping the table. Runs already in
``--out`` are reused (a stopped table resumes; both tables in one ``--out`` train each run once). Cells: mean +- std
over seeds, or a row run once with each task's bootstrap 95% interval; the papers' numbers stand beside each row.
Ensemble rows use the exports of their base row over all ``--seeds`` as members.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.results.field_rows import LOCAL_TASKS, ROWS, SEVEN_TASKS, Row
from benchmarks.results.paper_rows import ROWS as PAPER_ROWS
from benchmarks.results.paper_rows import with_references
from benchmarks.results.paper_verdicts import gains
from benchmarks.results.paper_verdicts import markdown as papers_markdown
from benchmarks.tools.cpu_features import cpu_line
from sts_lightning.embeddings.io.export_note import read_loading_command
from sts_lightning.sts.tasks import load_task

ROOT = Path(__file__).resolve().parents[2]
MODEL_SELECTION_TASK = "stsb-dev"  # what trained rows validate on (SimCSE's recipe), whatever the table scores


def available_tasks(data_dir: str | None) -> list[str]:
    """SimCSE's seven tasks where all are in the data directory, else the local default set."""
    try:
        for task in SEVEN_TASKS:
            load_task(task, data_dir)
        return list(SEVEN_TASKS)
    except Exception:  # noqa: BLE001 - any missing file: fall back to what every checkout has
        return list(LOCAL_TASKS)


def _run(args: list[str], log_file: Path) -> None:
    """Run ``python <args>`` from the repository root; its output goes to ``log_file``; a failure raises with its tail.
    A finished run's wall-clock seconds go beside its log (``<name>.seconds``): a resumed table reuses the run, and
    its wall column still says what the run cost (``recorded_seconds``)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log_file.open("w") as out:
        done = subprocess.run([sys.executable, *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                              env={**os.environ, "WANDB_MODE": os.environ.get("WANDB_MODE", "disabled")})
    if done.returncode != 0:
        tail = log_file.read_text().strip().splitlines()[-3:]
        raise RuntimeError(f"exit {done.returncode}: {' | '.join(tail)} (log: {log_file})")
    log_file.with_suffix(".seconds").write_text(f"{time.perf_counter() - start:.1f}\n")


def recorded_seconds(row_dir: Path, seeds: list[int]) -> float:
    """Seconds the runs of one row's ``seeds`` took when they ran (training, fitting and scoring; the files ``_run``
    left under ``row_dir``: ``seed<s>.seconds``, ``seed<s>/eval.seconds``, ``eval-seed<s>.seconds``). Runs of
    other seeds in the same directory do not count."""
    wanted = {f"seed{s}" for s in seeds}
    total = 0.0
    for path in row_dir.glob("**/*.seconds"):
        first = path.relative_to(row_dir).parts[0].removesuffix(".seconds").removeprefix("eval-")
        if first in wanted:
            total += float(path.read_text())
    return total


def _evaluate(encoder: str, scorer: str, tasks: list[str], seed: int, run_dir: Path,
              extra: tuple[str, ...] | list[str] = ()) -> dict[str, float]:
    """``evaluate.py`` on one encoder and scorer; ``{task: Spearman x100}`` from its ``results.json``."""
    results = run_dir / "results.json"
    if not results.is_file():
        _run(["evaluate.py", f"encoders=[{encoder}]", f"scorers=[{scorer}]", f"tasks=[{','.join(tasks)}]",
              f"seed={seed}", f"hydra.run.dir={run_dir}", *extra], run_dir.parent / f"{run_dir.name}.log")
    row = json.loads(results.read_text())["results"][0]
    return {task: float(value["all"]["spearman"]) for task, value in row["tasks"].items()}


def _trained(run_dir: Path, args: list[str], seed: int, steps: int | None) -> Path:
    """Run ``args`` (a ``train.py`` command gets the seed, step budget, validation task and run directory; any
    other command writes ``run_dir/export`` itself) unless its export is already there; the export directory."""
    export = run_dir / "export"
    if not (export / "LOADING.md").is_file():
        shutil.rmtree(run_dir, ignore_errors=True)  # a stopped run: train.py refuses a directory holding one
        if args[0] == "train.py":
            budget = [f"trainer.max_steps={steps}"] if steps else []
            args = [*args, f"seed={seed}", *budget, f"callbacks.sts_evaluation.tasks=[{MODEL_SELECTION_TASK}]",
                    f"hydra.run.dir={run_dir}"]
        else:
            run_dir.mkdir(parents=True)
        _run(args, run_dir.parent / f"{run_dir.name}.log")
    return export


def train_row(row: Row, backbone: str, seed: int, steps: int | None, out: Path, rows: tuple[Row, ...] = ROWS) -> Path:
    """Train / fit one row's method on the backbone (unless already done); its export directory. A row with a
    ``base`` gets that row's export (trained first) for ``{base}`` in its overrides."""
    args = ["train.py", *row.overrides, f"model.model_name_or_path={backbone}"]
    if row.base:
        base = next(r for r in rows if r.key == row.base)
        export = train_row(base, backbone, seed if base.seeded else 0, steps, out, rows)
        args = [a.replace("{base}", str(export)) for a in args]
    return _trained(out / row.key / f"seed{seed}", args, seed, steps)


def ensemble_row(row: Row, backbone: str, seed: int, steps: int | None, out: Path, members: list[Path]) -> Path:
    """Train / fit an ensemble row on the exports ``members`` (its base row's seeds); its export directory."""
    run_dir = out / row.key / f"seed{seed}"
    fill = {"{backbone}": backbone, "{members}": ",".join(str(m) for m in members), "{export}": str(run_dir / "export")}
    args = list(row.overrides)
    for placeholder, value in fill.items():
        args = [a.replace(placeholder, value) for a in args]
    return _trained(run_dir, args, seed, steps)


def _score_export(export: Path, tasks: list[str], seed: int, run_dir: Path, eval_extra: tuple[str, ...]) -> dict:
    """Score an export exactly as its ``LOADING.md`` says."""
    encoders, scorer, extra = read_loading_command(export)
    return _evaluate(",".join(encoders), scorer, tasks, seed, run_dir, [*extra, *eval_extra])


def eval_dir(row: Row, seed: int, out: Path) -> Path:
    """The ``evaluate.py`` run directory that scores one row and seed (a trained row's beside its training run)."""
    return out / row.key / f"seed{seed}" / "eval" if row.kind in ("train", "ensemble") else out / row.key / f"eval-seed{seed}"


def intervals(run_dir: Path) -> dict[str, list[float]]:
    """``{task: [lo, hi]}``: the bootstrap 95% intervals of an ``evaluate.py`` run ({} where it computed none)."""
    path = run_dir / "results.json"
    if not path.is_file():
        return {}
    row = json.loads(path.read_text())["results"][0]
    cis = {t: v["all"].get("spearman_ci") for t, v in row["tasks"].items()}
    return {t: [float(x) for x in ci] for t, ci in cis.items() if ci and all(x == x for x in ci)}  # x == x: not NaN


def score_row(row: Row, backbone: str, seed: int, steps: int | None, tasks: list[str], out: Path,
              eval_extra: tuple[str, ...] = (), rows: tuple[Row, ...] = ROWS,
              members: tuple[int, ...] = (0,)) -> dict[str, float]:
    """``{task: Spearman}`` of one row and seed (``eval_extra``: overrides of every ``evaluate.py`` call; ``rows``:
    where ``base`` rows are looked up; ``members``: the seeds of an ensemble row's base row)."""
    if row.kind == "pool":
        return _evaluate(backbone, row.scorer, tasks, seed, eval_dir(row, seed, out), eval_extra)
    if row.kind == "train":
        export = train_row(row, backbone, seed, steps, out, rows)
        return _score_export(export, tasks, seed, eval_dir(row, seed, out), eval_extra)
    base = next(r for r in rows if r.key == row.base)
    if row.kind == "ensemble":
        exports = [train_row(base, backbone, s, steps, out) for s in members]
        export = ensemble_row(row, backbone, seed, steps, out, exports)
        return _score_export(export, tasks, seed, eval_dir(row, seed, out), eval_extra)
    export = train_row(base, backbone, seed if base.seeded else 0, steps, out)
    encoder = str(export) if row.encoder_is_export else backbone
    return _evaluate(encoder, row.scorer.replace("{export}", str(export)), tasks, seed, eval_dir(row, seed, out),
                     eval_extra)


def summarise(scores: list[dict[str, float]], tasks: list[str]) -> dict:
    """Per task and average: mean and (sample) std over seeds."""
    averages = [statistics.fmean(s[t] for t in tasks) for s in scores]
    cell = {t: statistics.fmean(s[t] for s in scores) for t in tasks}
    spread = {t: statistics.stdev(s[t] for s in scores) if len(scores) > 1 else 0.0 for t in tasks}
    return {"tasks": cell, "task_std": spread, "avg": statistics.fmean(averages),
            "std": statistics.stdev(averages) if len(averages) > 1 else 0.0, "seeds": len(scores)}


SPREAD_LEGEND = ("a row of several seeds: mean +- std (sample std over the seeds); a row run once: [lo, hi] is the "
                 "bootstrap 95% interval of its evaluation (the task's pairs resampled); wall: what the row's runs took when "
                 "they ran (a resumed table keeps it)")


def task_cell(got: dict, task: str) -> str:
    """One task's cell: mean +- std over several seeds, else the single run's value with its interval if known."""
    value = f"{got['tasks'][task]:.2f}"
    if got["seeds"] > 1:
        return f"{value} +- {got.get('task_std', {}).get(task, float('nan')):.2f}"
    ci = got.get("intervals", {}).get(task)
    return f"{value} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else value


def markdown(results: dict, tasks: list[str], backbone: str) -> str:
    head = ["method", *tasks, f"avg ({backbone})", "paper avg (BERT-base)", "paper source", "wall"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in (r for r in ROWS if r.key in results):
        got = results[row.key]
        paper = f"{row.paper:.2f}" if row.paper is not None else "-"
        if "error" in got:
            cells = ["failed"] * len(tasks) + [got["error"][:60]]
        else:
            spread = f" +- {got['std']:.2f}" if got["seeds"] > 1 else ""
            cells = [task_cell(got, t) for t in tasks] + [f"{got['avg']:.2f}{spread}"]
        lines.append("| " + " | ".join([row.label, *cells, paper, row.paper_note or "-",
                                        f"{got.get('seconds', 0) / 60:.1f} min"]) + " |")
    return "\n".join([*lines, "", SPREAD_LEGEND])


TABLES = {"field": (ROWS, markdown), "papers": (PAPER_ROWS, papers_markdown)}


def row_seeds(text: str) -> dict[str, list[int]]:
    """``--row-seeds``: ``"flow=0,simcse=0;1"`` -> ``{"flow": [0], "simcse": [0, 1]}``.

    Why: on 2 CPU cores a table of twenty trained rows x three seeds takes most of a day; the rows a claim rests on
    keep their seeds while the others run once, and one invocation still writes the whole table (std 0, 1 seed).
    """
    out: dict[str, list[int]] = {}
    for item in filter(None, text.split(",")):
        key, _, seeds = item.partition("=")
        try:  # "flow" and "flow=" fail here too: int("")
            out[key.strip()] = [int(s) for s in seeds.split(";")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r}: expected ROW=SEED[;SEED...], e.g. flow=0 or simcse=0;1") from None
    return out


def run_rows(rows: tuple[Row, ...], keys: list[str], args: argparse.Namespace, seeds: list[int], tasks: list[str],
             out: Path, eval_extra: tuple[str, ...], per_seed: bool) -> dict[str, dict]:
    """Score the rows named in ``keys``; a failing row is reported in its cell (``per_seed``: keep each seed's
    average too, which an ensemble row's best-member reference needs)."""
    results: dict[str, dict] = {}
    for row in (r for r in rows if r.key in keys):
        t0 = time.perf_counter()
        run_seeds = args.row_seeds.get(row.key, seeds) if row.seeded else [0]
        try:
            scores = [score_row(row, args.backbone, s, args.steps, tasks, out, eval_extra, rows, tuple(seeds))
                      for s in run_seeds]
            results[row.key] = summarise(scores, tasks)
            if len(run_seeds) == 1:  # one run: its bootstrap intervals say what its numbers can tell apart
                results[row.key]["intervals"] = intervals(eval_dir(row, run_seeds[0], out))
            if per_seed:
                results[row.key]["seed_avgs"] = {str(s): statistics.fmean(sc[t] for t in tasks)
                                                 for s, sc in zip(run_seeds, scores, strict=True)}
            print(f"{row.label}: {results[row.key]['avg']:.2f} +- {results[row.key]['std']:.2f}", flush=True)
        except Exception as err:  # noqa: BLE001 - one failing row must not lose the others
            results[row.key] = {"error": f"{type(err).__name__}: {err}"}
            print(f"{row.label}: failed: {err}", flush=True)
        # reused runs cost nothing now: the wall column shows what they took when they ran
        results[row.key]["seconds"] = max(time.perf_counter() - t0, recorded_seconds(out / row.key, run_seeds))
    return results


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--table", choices=sorted(TABLES), default="field",
                        help="field: SimCSE Table 5's rows; papers: our papers' claims, each row vs its reference")
    parser.add_argument("--backbone", required=True, help="packaged short name, local directory or hub name")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds of the trained rows")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per trained row (default: recipe)")
    parser.add_argument("--row-seeds", type=row_seeds, default={},
                        help="seeds of single rows, e.g. flow=0,simcse=0;1 (default: --seeds); an ensemble row's "
                             "members stay its base row's --seeds")
    parser.add_argument("--rows", default=None, help="comma-separated row keys (default: all)")
    parser.add_argument("--tasks", default=None, help="comma-separated tasks (default: SimCSE's 7 where present)")
    parser.add_argument("--data-dir", default=os.environ.get("STS_DATA_DIR", str(ROOT.parent / "shared" / "data")))
    parser.add_argument("--sen2pro-samples", type=int, default=None,
                        help="Sen2Pro's samples per uncertainty (paper and default: 15); fewer bounds a CPU run")
    parser.add_argument("--out", default="outputs/field_table")
    args = parser.parse_args(argv)
    os.environ["STS_DATA_DIR"] = str(Path(args.data_dir).resolve())
    rows, render = TABLES[args.table]
    seeds = [int(s) for s in args.seeds.split(",")]
    keys = args.rows.split(",") if args.rows else [r.key for r in rows]
    unknown = set(keys) - {r.key for r in rows}
    unknown |= set(args.row_seeds) - {r.key for r in rows}
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)} of the {args.table} table; valid: {[r.key for r in rows]}")
    if args.table == "papers":
        keys = with_references(keys)  # a gain needs its reference row
    tasks = args.tasks.split(",") if args.tasks else available_tasks(args.data_dir)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(f"{args.table} table: backbone {args.backbone}, seeds {seeds}, steps {args.steps or 'recipe'}, "
          f"tasks {tasks}; {cpu_line()}", flush=True)
    eval_extra = (f"scorer_options.sen2pro.n_samples={args.sen2pro_samples}",) if args.sen2pro_samples else ()
    start = time.perf_counter()
    results = run_rows(rows, keys, args, seeds, tasks, out, eval_extra, per_seed=args.table == "papers")
    table = render(results, tasks, args.backbone)
    wall = time.perf_counter() - start
    name = f"{args.table}_table"
    (out / f"{name}.md").write_text(f"{table}\n\nwall time {wall / 60:.1f} min\n")
    saved = {"backbone": args.backbone, "seeds": seeds, "steps": args.steps, "tasks": tasks, "cpu": cpu_line(),
             "sen2pro_samples": args.sen2pro_samples, "rows": results, "wall_s": wall}
    if args.table == "papers":
        saved["gains"] = gains(results)
    (out / f"{name}.json").write_text(json.dumps(saved, indent=2))
    print(table)
    print(f"wall time {wall / 60:.1f} min")
    return results


if __name__ == "__main__":
    main()
