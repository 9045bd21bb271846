"""The generated part of ``--help`` for ``train.py`` / ``evaluate.py``: the names a user can type, read from the
registries and config files so no hand-written list goes stale (``${sts_help:<app>}`` in ``configs/hydra/help/``).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from omegaconf import OmegaConf

from sts_lightning.embeddings.encoders.packaged import PACKAGED_MODELS
from sts_lightning.embeddings.io.package_files import CONFIG_DIR
from sts_lightning.embeddings.io.user_form import command, for_this_install
from sts_lightning.embeddings.methods.registry import scorer_groups, trained_methods
from sts_lightning.sts.hub import HUB_TASKS
from sts_lightning.sts.tasks import DATA_DIR_ENV, LOCAL_TASKS, MTEB_TASKS, TASK_GROUPS

RESOLVER = "sts_help"
COMMAND_RESOLVER = "sts_cmd"  # ${sts_cmd:train}: python train.py in a checkout, sts-train installed
WIDTH = 110
GROUP_NOTES = {"standard": "the papers' 7 tasks (their average is reported when all are run): ",
               "default": "the local default set: ", "mteb": "MTEB's 7 English STS tasks, under MTEB's names: "}


def register_resolver() -> None:
    """Make ``${sts_help:<app>}`` resolvable in the help template (idempotent)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, help_text)
    if not OmegaConf.has_resolver(COMMAND_RESOLVER):
        OmegaConf.register_new_resolver(COMMAND_RESOLVER, command)


def help_text(app: str) -> str:
    """The generated sections for ``evaluate`` or ``train``, ``$`` escaped, commands in the user's form."""
    sections = {"evaluate": evaluate_sections, "train": train_sections}[app]()
    return for_this_install("\n\n".join(sections)).replace("$", "$$")


def evaluate_sections() -> list[str]:
    entries = scorer_groups()
    encoders = [(m.name, m.source + (f" (alias: {', '.join(m.aliases)})" if m.aliases else ""))
                for m in PACKAGED_MODELS.values()]
    free = [n for e in entries for n in e.names if e.encoder_free]
    encoders += [("none", f"no encoder: only the encoder-free scorers ({', '.join(free)})"),
                 ("<path or name>", "a local Hugging Face / sentence-transformers directory (a train.py export), "
                                    "a training checkpoint *.ckpt, or a hub name (online)")]
    scorers = []
    for entry in entries:
        text = entry.summary.replace("``", "`")
        options = [f"{o} (required)" if o in entry.required else o for o in entry.options]
        text += f" Options: {', '.join(options)}." if options else ""
        text += " Encoder-free: use with encoders=[none]." if entry.encoder_free else ""
        text += f" {entry.note}" if entry.note else ""
        scorers.append((", ".join(entry.names), text))
    tasks = [("<local task>", f"(data_source=local, files in paths.data_dir or ${DATA_DIR_ENV}): {', '.join(LOCAL_TASKS)}"),
             ("<hub task>", f"(data_source=hub, online): {', '.join(HUB_TASKS)}"),
             ("<MTEB name>", f"MTEB's names for the sets MTEB scores (local or hub): {', '.join(MTEB_TASKS)}")]
    tasks += [(group, f"group: {GROUP_NOTES.get(group, '')}{', '.join(members)}") for group, members in TASK_GROUPS.items()]
    return [
        "Options (configs/evaluate.yaml; override any as key=value, e.g. encoder.device=cuda):\n"
        + textwrap.indent(config_body(CONFIG_DIR / "evaluate.yaml"), "  "),
        "Encoders (encoders=[a,b]; packaged names work offline once `make install-models` has installed them):\n"
        + table(encoders),
        "Scorers (scorers=[a,b], or {name: x, label: y, <option>: value}; defaults in scorer_options.<name>):\n"
        + table(scorers),
        "Tasks (tasks=[a,b]; a+b pools the subsets into one task; a group, tasks=standard or tasks=[standard,b],\n"
        "stands for its tasks, one column each):\n" + table(tasks),
    ]


def train_sections() -> list[str]:
    models = [(m.name, str(m.data), f"{m.title}: {m.summary}") for m in trained_methods()]
    names = [(option_name("experiment", p), p) for p in group_files("experiment")]
    room = WIDTH - 4 - min(max(len(name) for name, _ in names), 24)  # a longer name gets a line of its own
    experiments = [(name, clip(summary(p), room)) for name, p in names]
    trainers = [(p.stem, "\n".join(header(p))) for p in group_files("trainer")]
    shown = {"model", "data", "trainer", "logger", "experiment", "hydra"}
    others = [(d.name, ", ".join(option_name(d.name, p) for p in group_files(d.name)))
              for d in sorted(CONFIG_DIR.iterdir()) if d.is_dir() and d.name not in shown]
    return [
        "Models (model=<name> also selects the data group it brings; data=<group> on the command line wins):\n"
        + table([("model", "data", "method"), *models]),
        "Data groups (data=<group>):\n" + table([(p.stem, summary(p)) for p in group_files("data")]),
        "Trainers (trainer=<name>; any Lightning Trainer argument as trainer.<arg>=value):\n"
        + table(trainers),
        "Loggers (logger=<name>):\n" + table([(p.stem, summary(p)) for p in group_files("logger")]),
        "Experiments (experiment=<method>/<recipe>: a complete recipe; see the file's header for its command):\n"
        + table(experiments),
        "Other groups:\n" + table(others),
        "Options (configs/train.yaml):\n" + textwrap.indent(config_body(CONFIG_DIR / "train.yaml"), "  "),
    ]


def group_files(group: str) -> list[Path]:
    """A config group's option files, subfolders included (configs/experiment/<method>/<recipe>.yaml)."""
    return sorted((CONFIG_DIR / group).rglob("*.yaml"), key=lambda p: option_name(group, p))


def option_name(group: str, path: Path) -> str:
    """What ``<group>=<name>`` takes for a file of the group: ``a/b`` for experiment/a/b.yaml."""
    return path.relative_to(CONFIG_DIR / group).with_suffix("").as_posix()


def header(path: Path) -> list[str]:
    """The leading comment lines of a config file, ``#`` and the ``@package`` directive removed."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            lines.append(line[2:] if line.startswith("# ") else line[1:])
    return lines


def summary(path: Path) -> str:
    """First sentence of the header's first paragraph (it ends at an indented command line)."""
    paragraph = []
    for line in header(path):
        if not line.strip() or line.startswith(" "):
            break
        paragraph.append(line)
    return first_sentence(" ".join(paragraph)).rstrip(":,;")


def config_body(path: Path) -> str:
    """A primary config without its header comment and ``defaults`` list: its keys, values and comments."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    body, in_defaults = [], False
    for line in lines[start:]:
        if line.startswith("defaults:"):
            in_defaults = True
        elif in_defaults and (line.startswith((" ", "-")) or not line.strip()):
            continue
        else:
            in_defaults = False
            body.append(line)
    return "\n".join(body).strip("\n")


def first_sentence(text: str) -> str:
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    for i, char in enumerate(paragraph[:-1]):
        if char == "." and paragraph[i + 1] == " " and paragraph[i + 2:i + 3].isupper():
            return paragraph[:i + 1]
    return paragraph


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 4].rsplit(" ", 1)[0] + " ..."


def table(rows: list[tuple[str, ...]]) -> str:
    """Rows as aligned columns, the last one wrapped under itself; a first cell too long gets a line of its own."""
    widths = [min(max(len(r[i]) for r in rows), 24) for i in range(len(rows[0]) - 1)]
    indent = 2 + sum(w + 2 for w in widths)
    out = []
    for row in rows:
        lead = "  " + "".join(cell.ljust(w + 2) for cell, w in zip(row[:-1], widths, strict=True))
        wrapped = [w for line in row[-1].split("\n") for w in textwrap.wrap(
            line, WIDTH - indent, break_on_hyphens=False, subsequent_indent=line[:len(line) - len(line.lstrip())])
            or [""]]
        if len(lead) > indent:
            out.append(lead.rstrip())
            lead = " " * indent
        out.append(lead + wrapped[0])
        out.extend(" " * indent + line for line in wrapped[1:])
    return "\n".join(out)
