"""STS tasks by name, found in one data directory (or on the Hugging Face hub for online users).

Layout of the data directory (the original releases, unmodified)::

    stsb/sts-{train,dev,test}.csv
    sick/SICK_{train,trial}.txt, sick/SICK_test_annotated.txt (or SICK_test.txt)
    sts/STS20{12..16}-en-test/  (or STS{12..16}-en-test/), each with STS.input.<set>.txt + STS.gs.<set>.txt

``+`` pools tasks into one (``sick-train+sick-trial``); a GROUP (``TASK_GROUPS``: ``standard``, ``default``,
``mteb``) stands for its tasks, each scored on its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sts_lightning.embeddings.errors import ConfigError, DataError, unknown_choice
from sts_lightning.embeddings.io.data_dir import DATA_DIR_ENV, default_data_dir
from sts_lightning.sts.hub import load_hub_task
from sts_lightning.sts.readers import STSPairs, read_semeval_dir, read_sick, read_stsb

STANDARD_TASKS = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb-test", "sick-test"]
LOCAL_DEFAULT_TASKS = ["sts12", "sts16", "stsb-dev", "sick-train+sick-trial"]

DATA_DIR_HELP = f"""\
Provide the STS data directory with `paths.data_dir=/path/to/data` or the environment variable
{DATA_DIR_ENV} (default: ../shared/data beside a checkout, where it exists;
none for an installed package). It must contain the original files, for example:
  stsb/sts-dev.csv                      (STS Benchmark, tab-separated)
  sick/SICK_trial.txt, sick/SICK_train.txt
  sts/STS2012-en-test/STS.input.MSRpar.txt + STS.gs.MSRpar.txt (and the other subsets)
  sts/STS2016-en-test/STS2016.input.headlines.txt + STS2016.gs.headlines.txt
Online users can instead set `data_source=hub` to download the sets from the Hugging Face hub."""


@dataclass
class STSTask:
    """A named task: one or more subsets of scored pairs (STS12 has five, STS-B dev one)."""

    name: str
    subsets: dict[str, STSPairs]

    @property
    def num_pairs(self) -> int:
        return sum(len(p) for p in self.subsets.values())


class MissingTaskError(DataError):
    """A local task whose files are not in the data directory (``load_tasks`` names them all in one line)."""

    def __init__(self, message: str, task: str) -> None:
        super().__init__(message)
        self.task = task


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path:
    """The configured directory, else ``$STS_DATA_DIR``, else ``../shared/data`` beside the checkout; else an error."""
    value = data_dir or default_data_dir()
    if not value:
        raise DataError("no STS data directory configured.\n" + DATA_DIR_HELP)
    path = Path(value).expanduser()
    if not path.is_dir():
        raise DataError(f"STS data directory {path} does not exist.\n" + DATA_DIR_HELP)
    return path


def _first_existing(candidates: Sequence[Path], task: str) -> Path:
    for c in candidates:
        if c.exists():
            return c
    tried = "\n  ".join(str(c) for c in candidates)
    raise MissingTaskError(f"task {task!r}: none of these files exists:\n  {tried}", task)


def _stsb(split: str) -> Callable[[Path], dict[str, STSPairs]]:
    return lambda root: {split: read_stsb(_first_existing([root / "stsb" / f"sts-{split}.csv"], f"stsb-{split}"))}


def sick_files(root: Path, split: str) -> list[Path]:
    """Where SICK's ``split`` is looked for, in order (also by the training readers)."""
    return [root / "sick" / n for n in [f"SICK_{split}.txt", *(["SICK_test_annotated.txt"] if split == "test" else [])]]


def _sick(split: str) -> Callable[[Path], dict[str, STSPairs]]:
    return lambda root: {split: read_sick(_first_existing(sick_files(root, split), f"sick-{split}"))}


def _semeval(year: int) -> Callable[[Path], dict[str, STSPairs]]:
    def load(root: Path) -> dict[str, STSPairs]:
        names = [f"STS{year}-en-test", f"STS{year % 100}-en-test"]
        dirs = [base / n for base in (root / "sts", root) for n in names]
        return read_semeval_dir(_first_existing(dirs, f"sts{year % 100}"))

    return load


LOCAL_TASKS: dict[str, Callable[[Path], dict[str, STSPairs]]] = {
    **{f"stsb-{s}": _stsb(s) for s in ("train", "dev", "test")},
    **{f"sick-{s}": _sick(s) for s in ("train", "trial", "test")},
    **{f"sts{y % 100}": _semeval(y) for y in range(2012, 2017)},
}


@dataclass(frozen=True)
class MTEBName:
    """An MTEB STS task name and the set it evaluates: ours locally and on the hub, its size in MTEB."""

    local: str
    hub: str
    pairs: int
    provide: str  # the files that make the local task complete
    alternative: str | None = None  # a local task that exists in the shared data, when the MTEB one is absent


# MTEB scores the pooled test split with one correlation, our ``all`` aggregate. MTEB's SICK-R is the whole of
# SICK (9927 pairs: train + trial + test); its STSBenchmark is the STS-B test split, which differs from dev.
MTEB_TASKS: dict[str, MTEBName] = {
    "STSBenchmark": MTEBName("stsb-test", "stsb-test", 1379, "stsb/sts-test.csv", "stsb-dev"),
    "SICK-R": MTEBName("sick-train+sick-trial+sick-test", "sick-test", 9927,
                       "sick/SICK_train.txt, sick/SICK_trial.txt and sick/SICK_test_annotated.txt",
                       "sick-train+sick-trial"),
    **{f"STS{y % 100}": MTEBName(f"sts{y % 100}", f"sts{y % 100}", n,
                                 f"sts/STS{y}-en-test/STS.input.<set>.txt + STS.gs.<set>.txt (every subset)")
       for y, n in ((2012, 3108), (2013, 1500), (2014, 3750), (2015, 3000), (2016, 1186))},
}


# Names that stand for several tasks (``tasks=standard`` or ``tasks=[standard, stsb-dev]``); ``--help`` lists them.
TASK_GROUPS: dict[str, list[str]] = {
    "standard": STANDARD_TASKS,  # STS12-16, STS-B test, SICK-R test: the papers' table
    "default": LOCAL_DEFAULT_TASKS,  # what the shared data directory holds
    "mteb": list(MTEB_TASKS),  # MTEB's seven English STS tasks, under MTEB's names
}


def local_files(task: str) -> str:
    """The files (relative to the data directory) that a local task reads: what to provide when it is missing."""
    if task in MTEB_TASKS:
        return MTEB_TASKS[task].provide
    kind, _, split = task.partition("-")
    if kind == "stsb":
        return f"stsb/sts-{split}.csv"
    if kind == "sick":
        return "sick/SICK_test_annotated.txt (or SICK_test.txt)" if split == "test" else f"sick/SICK_{split}.txt"
    return next((m.provide for m in MTEB_TASKS.values() if m.local == task), task)


def expand_groups(names: Sequence[str]) -> list[str]:
    """Task names with every group replaced by its tasks, in order, each task once."""
    out: list[str] = []
    for name in names:
        out.extend(TASK_GROUPS.get(str(name), [str(name)]))
    return list(dict.fromkeys(out))


def load_tasks(names: Sequence[str] | str, data_dir: str | os.PathLike | None = None,
               source: str = "local") -> list[STSTask]:
    """Every task of ``names`` (groups expanded), each loaded by ``load_task``; missing local sets: ONE ``DataError`` line."""
    names = [names] if isinstance(names, str) else [str(n) for n in names]
    tasks, missing = [], []
    for name in expand_groups(names):
        try:
            tasks.append(load_task(name, data_dir, source))
        except MissingTaskError as err:
            missing.append(err.task)
    if missing:
        groups = [n for n in names if n in TASK_GROUPS]
        which = f"task group {', '.join(repr(g) for g in groups)}" if groups else "tasks"
        needs = "; ".join(f"{task} needs {local_files(task)}" for task in dict.fromkeys(missing))
        raise DataError(f"{which}: {len(missing)} of {len(missing) + len(tasks)} sets are not in "
                        f"{resolve_data_dir(data_dir)}: {needs}. Provide these files, run fewer tasks "
                        "(tasks=[...]), or use data_source=hub online")
    return tasks


def _load_mteb_name(name: str, data_dir: str | os.PathLike | None, source: str) -> STSTask:
    """MTEB's task under its own name; a missing file names what to provide and the local stand-in."""
    spec = MTEB_TASKS[name]
    ours = spec.hub if source == "hub" else spec.local
    try:
        task = load_task(ours, data_dir, source)
    except DataError as err:
        if source == "hub":
            raise DataError(f"MTEB task {name} is our hub task {ours}: {err}") from err
        hint = f" Or use the local task {spec.alternative} (a different set)." if spec.alternative else ""
        message = (f"MTEB task {name} is our {ours} ({spec.pairs} pairs in MTEB); provide {spec.provide} in the "
                   f"data directory, or data_source=hub online.{hint} ({' '.join(str(err).split())})")
        if isinstance(err, MissingTaskError):
            raise MissingTaskError(message, name) from err
        raise DataError(message) from err
    return STSTask(name, task.subsets)


def load_task(name: str, data_dir: str | os.PathLike | None = None, source: str = "local") -> STSTask:
    """Load a task (or a ``+``-joined pool) from the data directory or the hub; MTEB's names load MTEB's sets."""
    if name in MTEB_TASKS:
        return _load_mteb_name(name, data_dir, source)
    if name in TASK_GROUPS:
        raise ConfigError(f"{name!r} is a task group ({', '.join(TASK_GROUPS[name])}), not one task: "
                          "load it with sts.tasks.load_tasks, or name its tasks")
    parts = name.split("+")
    subsets: dict[str, STSPairs] = {}
    for part in parts:
        if source == "hub":

            loaded = load_hub_task(part)
        elif source == "local":
            if part not in LOCAL_TASKS:
                raise unknown_choice("STS task", part, [*LOCAL_TASKS, *MTEB_TASKS, *TASK_GROUPS])
            loaded = LOCAL_TASKS[part](resolve_data_dir(data_dir))
        else:
            raise unknown_choice("data source", source, ["local", "hub"])
        prefix = f"{part}/" if len(parts) > 1 else ""
        subsets.update({f"{prefix}{k}": v for k, v in loaded.items()})
    return STSTask(name, subsets)
