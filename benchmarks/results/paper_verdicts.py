"""Gains and verdicts of the papers table: each row's measured gain over its reference beside the paper's claim.

Why a rule in code rather than words in a results page: "reproduces" is read off dozens of rows and backbones,
so it must mean the same every time. ``reproduces`` when the measured gain has the paper's sign and at least half
its size; ``direction only`` when it has the sign but is smaller; ``does not`` when its sign is the other one or it
is inside the seeds' noise (|gain| < the larger std over seeds of the row and its reference); ``-`` where the paper
gives no figure. An ensemble row's reference is the best of its members.
"""

from __future__ import annotations

from benchmarks.results.paper_rows import BEST_MEMBER, CLAIMS, ROWS

VERDICTS = ("reproduces", "direction only", "does not", "-")


def verdict(gain: float | None, paper: float | None, std: float = 0.0) -> str:
    """The verdict of a measured ``gain`` against the ``paper``'s gain (see the module docstring)."""
    if gain is None or paper is None:
        return "-"
    if gain * paper <= 0 or abs(gain) < std:
        return "does not"
    return "reproduces" if abs(gain) >= abs(paper) / 2 else "direction only"


def _reference(key: str, results: dict) -> tuple[str, float, float] | None:
    """``(label, average, std)`` of row ``key``'s reference in ``results``; ``None`` where it is missing."""
    versus = CLAIMS[key].versus
    if versus == BEST_MEMBER:
        base = next(r.base for r in ROWS if r.key == key)
        averages = results.get(base, {}).get("seed_avgs")  # {seed: average}
        if not averages:
            return None
        seed, best = max(averages.items(), key=lambda item: item[1])
        return f"best {base} (seed {seed})", best, 0.0
    got = results.get(versus)
    if versus is None or got is None or "avg" not in got:
        return None
    return versus, got["avg"], got["std"]


def gains(results: dict) -> dict[str, dict]:
    """Per row in ``results``: its reference, measured gain, the paper's gain and the verdict."""
    out = {}
    for key, got in results.items():
        claim = CLAIMS[key]
        ref = _reference(key, results) if "avg" in got else None
        gain = got["avg"] - ref[1] if ref else None
        std = max(got.get("std", 0.0), ref[2]) if ref else 0.0
        out[key] = {"versus": ref[0] if ref else claim.versus, "reference": ref[1] if ref else None,
                    "gain": gain, "paper_gain": claim.gain, "verdict": verdict(gain, claim.gain, std),
                    "source": claim.source}
    return out


def markdown(results: dict, tasks: list[str], backbone: str) -> str:
    """The papers table: tasks, average, then reference, measured gain, paper gain, verdict and source."""
    head = ["method", *tasks, f"avg ({backbone})", "vs", "gain", "paper gain", "verdict", "paper source", "wall"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    table = gains(results)
    for row in (r for r in ROWS if r.key in results):
        got, g = results[row.key], table[row.key]
        if "error" in got:
            cells = ["failed"] * len(tasks) + [got["error"][:60]]
        else:
            spread = f" +- {got['std']:.2f}" if got["seeds"] > 1 else ""
            cells = [f"{got['tasks'][t]:.2f}" for t in tasks] + [f"{got['avg']:.2f}{spread}"]
        measured = f"{g['gain']:+.2f}" if g["gain"] is not None else "-"
        paper = f"{g['paper_gain']:+.2f}" if g["paper_gain"] is not None else "-"
        lines.append("| " + " | ".join([row.label, *cells, g["versus"] or "-", measured, paper, g["verdict"],
                                        g["source"] or "-", f"{got.get('seconds', 0) / 60:.1f} min"]) + " |")
    return "\n".join(lines)
