"""The GPU figures in one table: what each benchmark recorded, with the card and versions beside it.

Why a file of records and a separate table: ``benchmarks/gpu/gpu_checklist.sh`` runs every check under its own time
budget, so any check may be cut; each benchmark appends one JSON line per finished result (``append_record``) as it
goes, and this module turns whatever is there into ``gpu_figures.md`` + ``gpu_figures.json`` at the end, marking the
checks that were cut or failed instead of losing the call's figures.

    python -m benchmarks.gpu.gpu_figures --records <dir of *.jsonl> --checks <checks.jsonl> --out <dir>
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
from pathlib import Path

import torch

from benchmarks.tools.cpu_features import cpu_line


def append_record(path: str | Path | None, record: dict) -> None:
    """Append ``record`` as one JSON line to ``path`` (nothing when ``path`` is None)."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def machine() -> dict:
    """The card, driver and versions every figure of this call was taken with."""
    import sentence_transformers
    import transformers

    info = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__, "cpu": cpu_line()}
    if torch.cuda.is_available():
        info["card"] = torch.cuda.get_device_name(0)
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20, check=True).stdout.strip()
            info["driver"], info["memory"] = (part.strip() for part in out.splitlines()[0].split(",", 1))
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            info["driver"] = "unknown (no nvidia-smi)"
    else:
        info["card"] = "none (CPU rehearsal)"
    return info


def pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def num(x, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def encode_rows(records: list[dict]) -> list[str]:
    header = ["size", "precision (ours / ST)", "sentences", "ours sent/s", "ST sent/s (best batch)", "ratio",
              "ours tokens/s", "MFU ours / ST", "idle ours / ST", "peak MiB ours / ST", "Spearman ours / ST / padded"]
    return table(header, [[r["model"], f"{r['precision']} / {r['peer_precision']}", f"{r['sentences']:,}",
                           num(r["ours_sps"]), f"{num(r['st_sps'])} ({r['st_batch']})", f"**{r['ratio']:.2f}x**",
                           num(r["ours_tps"]), f"{r['mfu_ours']:.3f} / {r['mfu_st']:.3f}",
                           f"{pct(r['idle_ours'])} / {pct(r['idle_st'])}",
                           f"{num(r['mem_ours_mib'])} / {num(r['mem_st_mib'])}",
                           f"{num(r['spearman_ours'], '.2f')} / {num(r['spearman_st'], '.2f')} / "
                           f"{num(r.get('spearman_reference'), '.2f')}"] for r in records])


def train_rows(records: list[dict]) -> list[str]:
    header = ["method", "size", "max length", "precision (ours / ST)", "ours ms", "ST ms", "ratio", "ours tokens/s",
              "MFU ours / ST", "idle ours / ST", "peak MiB ours / ST"]
    return table(header, [[r["method"], r["model"], str(r["max_length"]), f"{r['precision']} / {r['peer_precision']}",
                           f"{r['ours_ms']:.1f}", f"{r['st_ms']:.1f}", f"**{r['ratio']:.2f}x**", num(r["ours_tps"]),
                           f"{r['mfu_ours']:.3f} / {r['mfu_st']:.3f}", f"{pct(r['idle_ours'])} / {pct(r['idle_st'])}",
                           f"{num(r['mem_ours_mib'])} / {num(r['mem_st_mib'])}"] for r in records])


def e2e_rows(records: list[dict]) -> list[str]:
    header = ["run", "precision", "steps timed", "steps/s", "tokens/s", "MFU", "idle"]
    return table(header, [[r["run"], r["precision"], str(r["steps"]), f"{r['steps_per_s']:.2f}",
                           num(r["tokens_per_s"]), f"{r['mfu']:.3f}", pct(r["idle_fraction"])] for r in records])


def render(info: dict, records: list[dict], checks: list[dict]) -> str:
    lines = ["# GPU figures (issue 39)", "", "Card: " + ", ".join(f"{k} {v}" for k, v in info.items()), ""]
    for title, bench, rows in (("Encode", "encode", encode_rows), ("Training steps", "train", train_rows),
                               ("End to end (train.py)", "e2e", e2e_rows)):
        found = [r for r in records if r.get("bench") == bench]
        lines += [f"## {title}", ""] + (rows(found) if found else ["(no figures: the check was not run, cut or failed)"])
        lines.append("")
    notes = [c.get("note") or ("cut: over its time budget" if c.get("rc") in (124, 137) else "failed" if c.get("rc")
                               else "") for c in checks]
    lines += ["## Checks", ""] + table(["check", "rc", "seconds", "budget s", "note"], [
        [c["check"], str(c.get("rc", "-")), str(c.get("seconds", "-")), str(c.get("budget", "-")), note]
        for c, note in zip(checks, notes, strict=True)])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", required=True, help="directory of the benchmarks' *.jsonl records")
    parser.add_argument("--checks", default=None, help="the checklist's checks.jsonl (rc, seconds, budget)")
    parser.add_argument("--out", required=True, help="where gpu_figures.md and gpu_figures.json go")
    args = parser.parse_args(argv)
    records = [r for p in sorted(Path(args.records).glob("*.jsonl")) for r in read_jsonl(p)]
    checks = read_jsonl(Path(args.checks)) if args.checks else []
    info = machine()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_figures.md").write_text(render(info, records, checks), encoding="utf-8")
    (out / "gpu_figures.json").write_text(json.dumps({"machine": info, "records": records, "checks": checks},
                                                     indent=1, sort_keys=True), encoding="utf-8")
    print(f"wrote {out / 'gpu_figures.md'} ({len(records)} records, {len(checks)} checks)")


if __name__ == "__main__":
    main()
