"""The closing lines of a training run: what changed, where the results are, what to run next (from its files)."""

from __future__ import annotations

import shlex
from pathlib import Path

from sts_lightning.embeddings.io.export_note import EXPORT, NOTE_FILE, evaluate_line
from sts_lightning.embeddings.io.st_refusal import custom_module_types, is_cross_encoder, refused
from sts_lightning.embeddings.io.user_form import command
from sts_lightning.runs.run_size import size_line


def evaluate_command(export: Path) -> str:
    """The ``evaluate.py`` line the export's ``LOADING.md`` gives (a fitted export names its own scorer)."""
    note = export / NOTE_FILE
    if note.is_file():
        for line in note.read_text().splitlines():
            args = evaluate_line(line)
            if args is not None:  # written by either form; shown in this one
                return shlex.join([*command("evaluate").split(), *args]).replace(EXPORT, str(export))
    return f"{command('evaluate')} 'encoders=[{export}]'"


def run_summary(output_dir: Path, elapsed_s: float, best_checkpoint: str | None = None,
                best_score: float | None = None, monitor: str | None = None, exported: bool = False,
                stopped: str | None = None) -> str:
    """A multi-line summary of a finished run (what stopped it, the before/after table, artefacts, next commands)."""
    minutes, seconds = divmod(int(round(elapsed_s)), 60)
    lines = [f"run finished in {minutes}m{seconds:02d}s: {output_dir}"]
    if stopped:
        lines.append(stopped)
    table = output_dir / "sts_before_after.md"
    if table.is_file():
        lines += ["STS Spearman x100 before / after training (" + str(table) + "):", table.read_text().rstrip()]
    if best_checkpoint:
        score = f" ({monitor} {best_score:.2f})" if best_score is not None and monitor else ""
        lines.append(f"best checkpoint: {best_checkpoint}{score}")
    lines.append(size_line(output_dir))
    export = output_dir / "export"
    if exported and export.is_dir():
        lines.append(f"export: {export}")
        if is_cross_encoder(export):  # a pair model: scores, not vectors
            lines.append(f"  loads with CrossEncoder({str(export)!r}): .predict gives the evaluated scores")
        elif (export / "modules.json").is_file() and not refused(export):
            remote = ", trust_remote_code=True" if custom_module_types(export) else ""
            lines.append(f"  loads with SentenceTransformer({str(export)!r}{remote}) and AutoModel.from_pretrained(...)")
        steps = [(evaluate_command(export), "score the export on the STS tasks"),
                 (f"python -m sts_lightning.runs.compare_runs {output_dir} <other runs>", "one table + PNG of several runs"),
                 (f"{command('train')} --help", "every method and the data it brings")]
        width = max(len(command) for command, _ in steps)
        lines += ["next:", *(f"  {command:<{width}}  # {why}" for command, why in steps)]
    return "\n".join(lines)
