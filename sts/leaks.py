"""Which STS tasks a training data config contains: a train/test leak warns instead of passing silently.

SICK pairs are NLI pairs, and ``sts:<task>`` sources feed STS sentences to unsupervised objectives; some runs do
that on purpose (BERT-flow's "target" setting), so this warns and names the task, never refuses.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePath

from sts_lightning.embeddings.io.user_form import command
from sts_lightning.sts.tasks import LOCAL_DEFAULT_TASKS, MTEB_TASKS, expand_groups

log = logging.getLogger(__name__)

# Original file names (sts/readers.py) -> the task they hold.
FILE_TASKS = {"sts-train.csv": "stsb-train", "sts-dev.csv": "stsb-dev", "sts-test.csv": "stsb-test",
              "sick_train.txt": "sick-train", "sick_trial.txt": "sick-trial", "sick_test_annotated.txt": "sick-test",
              "sick_test.txt": "sick-test"}
SEMEVAL_DIR = re.compile(r"sts(20\d\d)-en-test", re.IGNORECASE)
SOURCE_KEYS = ("sources", "files")


def tasks_of_source(spec: str) -> set[str]:
    """STS tasks one data source string holds (``sick:train``, ``nli:sick:trial``, ``sts:a+b``, a file path)."""
    spec = spec.strip()
    if spec.startswith("nli:"):
        spec = spec[len("nli:"):]
    if spec.startswith("hub:"):
        spec = spec[len("hub:"):]
    if spec.startswith("sts:"):
        return {part for part in spec[len("sts:"):].split("+") if part}
    corpus, _, split = spec.partition(":")
    if corpus.lower() in ("sick", "stsb") and split:  # NLI / scored-pair source names (sick:train, stsb:train)
        return {f"{corpus.lower()}-{split.split(':')[-1].lower()}"}
    path = PurePath(spec)
    found = {FILE_TASKS[path.name.lower()]} if path.name.lower() in FILE_TASKS else set()
    for part in path.parts:
        match = SEMEVAL_DIR.fullmatch(part)
        if match:
            found.add(f"sts{int(match.group(1)) % 100}")
    return found


def training_sources(data_cfg: Mapping) -> list[str]:
    """The source / file strings of a data config (``data.sources``, ``data.files``)."""
    out: list[str] = []
    for key in SOURCE_KEYS:
        value = data_cfg.get(key) if hasattr(data_cfg, "get") else None
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, Iterable):
            out.extend(str(v) for v in value if isinstance(v, str))
    return out


def leaked_tasks(data_cfg: Mapping, eval_tasks: Sequence[str]) -> dict[str, str]:
    """``{evaluated task: training source holding it}`` for every overlap (empty: nothing leaks)."""
    names = [MTEB_TASKS[n].local if n in MTEB_TASKS else n for n in expand_groups(eval_tasks)]  # groups, MTEB names
    scored = {part for name in names for part in str(name).split("+")}
    leaks: dict[str, str] = {}
    for source in training_sources(data_cfg):
        for task in sorted(tasks_of_source(source) & scored):
            leaks.setdefault(task, source)
    return leaks


def warn_leaks(data_cfg: Mapping, eval_tasks: Sequence[str]) -> dict[str, str]:
    """Warn per evaluated (or ``evaluate.py`` default) task the training data holds; returns the run's own."""
    leaks = leaked_tasks(data_cfg, eval_tasks)
    for task, source in leaks.items():
        log.warning("train/test leak: the training data %r contains %s, which the STS evaluation scores; "
                    "its numbers are not held out (drop it from data.sources / data.files, or score other tasks "
                    "with callbacks.sts_evaluation.tasks=[...])", source, task)
    for task, source in leaked_tasks(data_cfg, LOCAL_DEFAULT_TASKS).items():
        if task not in leaks:
            log.warning("train/test leak: the training data %r contains %s, which `%s` scores by default "
                        "(tasks=default: %s); the export's numbers on it are not held out", source, task,
                        command("evaluate"), ", ".join(LOCAL_DEFAULT_TASKS))
    return leaks
