"""Merge several ``results.json`` files of ``evaluate.py`` into one markdown table, rows grouped by encoder.

Why: the results tables (docs/results/) come from more than one run (cheap shared-pass scorers in one command, the
30-pass Sen2Pro in another); this keeps the numbers exactly as the runs wrote them.

    python -m benchmarks.merge_results outputs/a/results.json outputs/b/results.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def merged_rows(paths: list[Path]) -> tuple[list[str], list[dict]]:
    results = [r for p in paths for r in json.loads(Path(p).read_text())["results"]]
    tasks = list(dict.fromkeys(t for r in results for t in r["tasks"]))
    order = list(dict.fromkeys(r["encoder"] for r in results))
    results.sort(key=lambda r: order.index(r["encoder"]))
    return tasks, results


def fmt(x: float | None) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.2f}"


def table(paths: list[Path]) -> str:
    tasks, results = merged_rows(paths)
    lines = ["| encoder | scorer | " + " | ".join(tasks) + " | avg |", "|---|---|" + "---|" * (len(tasks) + 1)]
    for r in results:
        vals = [r["tasks"].get(t, {}).get("all", {}).get("spearman", float("nan")) for t in tasks]
        avg = sum(vals) / len(vals) if not any(math.isnan(v) for v in vals) else float("nan")
        lines.append(f"| {r['encoder']} | {r['scorer']} | " + " | ".join(fmt(v) for v in vals) + f" | {fmt(avg)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=Path)
    print(table(parser.parse_args().results))


if __name__ == "__main__":
    main()
