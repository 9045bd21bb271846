"""``LOADING.md``: every export says, inside itself, how to load the vectors that were evaluated.

The wrong loader fails silently (``SentenceTransformer`` mean-pools any HF directory), so the note names the
sentence-transformers status and the exact ``evaluate.py`` command; the model card embeds ``loading_body``."""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.atomic import atomic_write
from sts_lightning.embeddings.io.user_form import command as user_command
from sts_lightning.embeddings.io.user_form import split_command

NOTE_FILE = "LOADING.md"
# In a ``sentence_transformers`` text: the export loads with its own module, which sentence-transformers imports only
# when asked to (``SentenceTransformer(path, trust_remote_code=True)``): the evaluated vectors, not a refusal.
REMOTE_CODE = "trust_remote_code=True"
EXPORT = "<export>"  # stands for this directory in the commands of the note
# In a ``sentence_transformers`` text: a pair model that sentence-transformers loads as a ``CrossEncoder`` (its
# ``predict`` gives the evaluated scores): a loader of its own kind, not a refusal.
CROSS_ENCODER = f'CrossEncoder("{EXPORT}")'

log = logging.getLogger(__name__)


def evaluate_command(encoders: Sequence[str], scorer: str, max_length: int | None = None) -> str:
    """The shell-quoted ``evaluate.py`` line scoring ``scorer`` on ``encoders``, in the writer's form; ``max_length``:
    the truncation evaluated with, when the encoder does not carry it."""
    args = [*user_command("evaluate").split(), f"encoders=[{','.join(encoders)}]", f"scorers=[{scorer}]"]
    return shlex.join(args + ([f"encoder.max_length={int(max_length)}"] if max_length is not None else []))


def with_dims(note: LoadingNote, dims: Sequence[int], width: int) -> LoadingNote:
    """The note of a Matryoshka-trained export: its trained prefixes and how to load and score them (the command
    stays the evaluated one: ``read_loading_command`` takes its extra arguments as encoder options)."""
    shorter = [int(d) for d in dims if int(d) < int(width)]
    if not shorter:
        return note
    listed = ",".join(str(d) for d in shorter)
    what = (f"{note.what} Trained with Matryoshka (model.matryoshka_dims={[int(d) for d in dims]}): the first "
            f"{listed} numbers of each vector are embeddings too: `sts_lightning.load(\"{EXPORT}\", dim={shorter[-1]})`, "
            f"or the command below with `'dims=[{listed}]'` (one `<scorer>@<d>` row each).")
    return LoadingNote(what, note.command, note.sentence_transformers)


def loading_note(what: str, command: str, sentence_transformers: str | None) -> str:
    """The markdown of the note; ``sentence_transformers``: ``None`` when ``SentenceTransformer(<export>)`` gives the
    evaluated vectors, else why it cannot."""
    return f"# Loading this export\n\n{loading_body(what, command, sentence_transformers)}"


def loading_body(what: str, command: str, sentence_transformers: str | None) -> str:
    """The note without its title: what ``loading_note`` writes and the model card (``embeddings.io.model_card``)
    embeds under its own heading, so the two never disagree."""
    if sentence_transformers is None:
        st = f'`SentenceTransformer("{EXPORT}").encode(...)` gives exactly the vectors that were evaluated.'
    elif loads_with_own_module(sentence_transformers) or loads_as_cross_encoder(sentence_transformers):
        st = f"{sentence_transformers}."
    else:
        st = (f"not a sentence-transformers model: {sentence_transformers}. "
              "Load it with sts-lightning, as below.")
    return (f"{what}\n\n- sentence-transformers: {st}\n"
            f"- sts-lightning (the evaluated scores; `{EXPORT}` is this directory):\n\n      {command}\n")


def write_loading_note(folder: str | os.PathLike, what: str, command: str,
                       sentence_transformers: str | None = None, shown_as: str | os.PathLike | None = None) -> Path:
    """Write ``LOADING.md`` into ``folder`` (atomically) and log how to load it (naming ``shown_as`` when ``folder``
    is an export's temporary copy); returns the file."""
    path = Path(folder) / NOTE_FILE
    atomic_write(path, loading_note(what, command, sentence_transformers).encode())
    if sentence_transformers is not None and not loads_as_cross_encoder(sentence_transformers):
        shown = Path(shown_as if shown_as is not None else folder)
        log.info("%s is not a sentence-transformers model (%s); load it with: %s", shown,
                 sentence_transformers, command.replace(EXPORT, str(shown)))
    return path


def read_loading_command(folder: str | os.PathLike) -> tuple[list[str], str, list[str]]:
    """``(encoders, scorer spec, other overrides)`` of the ``evaluate.py`` line in ``folder``'s ``LOADING.md``
    (``<export>`` replaced by ``folder``): how readers score an export exactly as it was evaluated."""
    folder = Path(folder)
    note = folder / NOTE_FILE
    try:
        lines = note.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise DataError(f"{note}: cannot read the export's loading note ({err.strerror or err})") from None
    line = next((x.strip() for x in lines if evaluate_line(x) is not None), None)
    if line is None:
        raise DataError(f"{note}: holds no `python evaluate.py ...` / `sts-evaluate ...` line; the export is damaged, "
                        "export it again")
    args = [arg.replace(EXPORT, str(folder)) for arg in evaluate_line(line) or []]
    encoders = next((a for a in args if a.startswith("encoders=[")), "encoders=[]")[len("encoders=["):-1]
    scorer = next((a for a in args if a.startswith("scorers=[")), "scorers=[]")[len("scorers=["):-1]
    if not encoders or not scorer:
        raise DataError(f"{note}: its evaluate.py line names no encoder or no scorer: {line}")
    return encoders.split(","), scorer, [a for a in args if not a.startswith(("encoders=", "scorers="))]


def loads_with_own_module(sentence_transformers: str | None) -> bool:
    """Whether a note's sentence-transformers text says the export loads with its own module (``REMOTE_CODE``)."""
    return sentence_transformers is not None and REMOTE_CODE in sentence_transformers


def loads_as_cross_encoder(sentence_transformers: str | None) -> bool:
    """Whether a note's sentence-transformers text says the export is a ``CrossEncoder`` (a pair model)."""
    return sentence_transformers is not None and CROSS_ENCODER in sentence_transformers


def evaluate_line(line: str) -> list[str] | None:
    """The arguments of ``line`` when it runs ``evaluate`` in either form (the note of an export written by a checkout
    or by an installed package), else ``None``."""
    try:
        parsed = split_command(line.strip())
    except ValueError:  # unbalanced quotes: prose, not a command
        return None
    return parsed[1] if parsed is not None and parsed[0] == "evaluate" else None


@dataclass(frozen=True)
class LoadingNote:
    """The arguments of ``write_loading_note``, for export writers that write the note inside their export."""

    what: str
    command: str
    sentence_transformers: str | None = None

    def write(self, folder: str | os.PathLike, shown_as: str | os.PathLike | None = None) -> Path:
        return write_loading_note(folder, self.what, self.command, self.sentence_transformers, shown_as)
