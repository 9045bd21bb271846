"""The order STS tasks are shown in, in every table and chart: the papers' (STS12..16, STS-B, SICK), whatever the
config's order, so two runs put a task in the same column. Names only, nothing heavy imported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Families in the papers' order; a task name belongs to the first family whose pattern matches its first
# ``+``-joined part (``sick-train+sick-trial`` is SICK). MTEB's names (STS12, STSBenchmark, SICK-R) fit too.
FAMILIES: list[re.Pattern[str]] = [
    *(re.compile(rf"^sts{year}($|[-_])") for year in range(12, 17)),
    re.compile(r"^(stsb|stsbenchmark)($|[-_])"),
    re.compile(r"^sick($|[-_])"),
]
# Inside a family: dev before test (model selection, then the reported split), then any other split by name.
SPLITS = ["dev", "test"]
AVERAGE_NAMES = {"avg", "mean", "average", "sts_avg"}


def is_average(name: str) -> bool:
    """``avg``, ``avg (sts12, sick-test)``, ``sts_avg``, ...: a column computed from the tasks, shown last."""
    lowered = name.lower()
    return lowered in AVERAGE_NAMES or lowered.startswith(("avg ", "avg(", "average "))


def _split_rank(first_part: str) -> tuple[int, str]:
    split = re.split(r"[-_]", first_part, maxsplit=1)[-1] if re.search(r"[-_]", first_part) else ""
    return (SPLITS.index(split), "") if split in SPLITS else (len(SPLITS), split)


def task_sort_key(name: str) -> tuple:
    """Known families first in the papers' order, unknown tasks after them alphabetically, averages last."""
    lowered = name.lower()
    if is_average(name):
        return (2, 0, (0, ""), lowered)
    first_part = lowered.split("+", 1)[0]
    for rank, family in enumerate(FAMILIES):
        if family.match(first_part):
            return (0, rank, _split_rank(first_part), lowered)
    return (1, 0, (0, ""), lowered)


def ordered_tasks(names: Iterable[str]) -> list[str]:
    """``names`` without duplicates, in the order above: STS12..STS16, STS-B (dev, test), SICK, others, averages."""
    return sorted(dict.fromkeys(names), key=task_sort_key)
