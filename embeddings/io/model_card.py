"""``README.md``: the model card every export carries (the sentence-transformers / Hugging Face convention).

Hub front-matter, the method and its paper, the training facts, the resolved config, the STS table and how to load
it. Pure rendering: ``TrainingFacts`` come from ``runs/train_run.py`` (``None`` outside a training run).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from sts_lightning.embeddings.encoders.packaged import hub_id
from sts_lightning.embeddings.io.atomic import atomic_write
from sts_lightning.embeddings.io.export_note import (
    EXPORT,
    LoadingNote,
    loading_body,
    loads_as_cross_encoder,
    loads_with_own_module,
)
from sts_lightning.embeddings.methods.declaration import MethodInfo

CARD_FILE = "README.md"
WALL_TIME = "- wall time:"  # the one line of a card that differs between an interrupted+resumed run and an uninterrupted one
EXAMPLE = ["A man is playing a guitar.", "Someone plays an instrument.", "The stock market fell today."]


@dataclass(frozen=True)
class DataFacts:
    """The training data as far as the datamodule knows it after ``setup``: ``rows`` counts items after filtering
    (``None``: unknown), ``per_source`` rows per source read separately (counting ``source_unit`` if not ``unit``),
    ``skipped`` reason -> rows left out."""

    sources: tuple[str, ...] = ()
    rows: int | None = None
    unit: str = "rows"
    per_source: Mapping[str, int] = field(default_factory=dict)
    source_unit: str | None = None
    skipped: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def hub_datasets(self) -> list[str]:
        """Hugging Face dataset ids of ``hub:<dataset>[:<config>]:<split>`` sources (front-matter ``datasets``)."""
        return list(dict.fromkeys(s.split(":")[1] for s in self.sources if s.startswith("hub:") and s.count(":") >= 2))


@dataclass(frozen=True)
class TrainingFacts:
    """What the training run knows and the export writer does not (``runs/train_run.py`` builds it)."""

    config_yaml: str
    data: DataFacts | None = None
    steps: int | None = None
    epochs: float | None = None  # a fraction where max_steps stopped mid-epoch
    precision: str | None = None
    sts_table: str | None = None
    sts_after: Mapping[str, float] = field(default_factory=dict)  # task -> Spearman x100: the model-index
    wall_time_s: float | None = None  # with resumed: the last process only
    resumed: bool = False


def _front_matter(method: MethodInfo, base_models: tuple[str, ...], note: LoadingNote,
                  training: TrainingFacts | None) -> dict:
    st = note.sentence_transformers is None  # an own module (PromptBERT) needs trust_remote_code: not a plain ST model
    pair = loads_as_cross_encoder(note.sentence_transformers)  # a CrossEncoder: scores pairs, ranks texts
    tags = ["sentence-transformers", "feature-extraction"] if st else \
        ["sentence-transformers", "cross-encoder", "text-classification"] if pair else []
    tags += ["sentence-similarity", "sts-lightning", method.key]
    meta: dict = {}
    hub_bases = [h for h in (hub_id(b) for b in base_models) if h]  # the Hub accepts model ids only (body: all)
    if hub_bases:
        meta["base_model"] = hub_bases[0] if len(hub_bases) == 1 else hub_bases
    meta.update({"library_name": "sentence-transformers" if st or pair else "transformers",
                 "pipeline_tag": "text-ranking" if pair else "sentence-similarity", "tags": tags})
    datasets = training.data.hub_datasets() if training is not None and training.data is not None else []
    if datasets:
        meta["datasets"] = datasets
    if training is not None and training.sts_after:
        meta["metrics"] = ["spearmanr"]
        meta["model-index"] = [{"name": f"{method.key} on {', '.join(base_models) or 'its sources'}", "results": [
            {"task": {"type": "semantic-similarity", "name": "Semantic Similarity"},
             "dataset": {"type": task, "name": task},
             "metrics": [{"type": "spearmanr", "value": round(float(score), 2),
                          "name": "Spearman x100 (cosine, after training)"}]}
            for task, score in training.sts_after.items()]}]
    return meta


def _data_lines(data: DataFacts | None) -> list[str]:
    if data is None:
        return ["- data: unknown"]
    sources = ", ".join(f"`{s}`" + (f" ({data.per_source[s]} {data.source_unit or data.unit})" if s in data.per_source else "")
                        for s in data.sources) or "unknown"
    lines = [f"- data: {sources}"]
    rows = f"{data.rows} {data.unit}" if data.rows is not None else "unknown"
    lines.append(f"- training rows (after filtering): {rows}")  # what the steps draw from, not how many they drew
    skipped = ", ".join(f"{reason}: {n}" for reason, n in data.skipped.items() if n)
    lines.append(f"- skipped while reading: {skipped or 'none'}")
    lines += [f"- {note}" for note in data.notes]
    return lines


def _training_section(training: TrainingFacts | None) -> list[str]:
    if training is None:
        return ["## Training", "",
                "Unknown: this export was written outside a training run (`export(path)` called directly), so its "
                "training data, steps, precision, wall time, configuration and STS scores are not recorded here.", ""]
    wall = "unknown" if training.wall_time_s is None else f"{training.wall_time_s:.1f} s"
    if training.resumed:
        wall += " (the process that finished it; the run was resumed from a checkpoint)"
    lines = ["## Training", "", *_data_lines(training.data)]
    if training.steps is not None:
        epochs = f" ({training.epochs:g} epoch{'' if training.epochs == 1 else 's'})" if training.epochs else ""
        lines.append(f"- steps: {training.steps}{epochs}")
    lines += [f"- precision: {training.precision or 'unknown'}", f"{WALL_TIME} {wall}", "",
              "Resolved configuration:", "", "```yaml", training.config_yaml.rstrip(), "```", ""]
    lines += ["## STS results", ""]
    if training.sts_table:
        lines += ["Spearman x100 of cosine similarities, before and after training (the run's STS callback):", "",
                  training.sts_table.rstrip(), ""]
    else:
        lines += ["Not recorded (the run had no STS evaluation before and after training).", ""]
    return lines


def _snippet(note: LoadingNote, base_models: tuple[str, ...], hf_weights: bool) -> list[str]:
    """Copy-paste Python for the export: ``SentenceTransformer`` where it reproduces the evaluated vectors, else
    the Hugging Face encoder (the export's own, or the frozen one it builds on) beside the ``evaluate.py`` line."""
    if note.sentence_transformers is None or loads_with_own_module(note.sentence_transformers):
        remote = ", trust_remote_code=True" if note.sentence_transformers is not None else ""
        return ["```python", "from sentence_transformers import SentenceTransformer", "",
                f'model = SentenceTransformer("{EXPORT}"{remote})', f"embeddings = model.encode({EXAMPLE!r})",
                "print(model.similarity(embeddings, embeddings))", "```"]
    if loads_as_cross_encoder(note.sentence_transformers):  # a pair model: scores, not vectors
        return ["```python", "from sentence_transformers import CrossEncoder", "",
                f'model = CrossEncoder("{EXPORT}")', f"scores = model.predict([{tuple(EXAMPLE[:2])!r}])", "```"]
    encoder = EXPORT if hf_weights else base_models[0] if len(base_models) == 1 else None
    if encoder is None:
        return []
    which = "its encoder" if hf_weights else "the frozen encoder it builds on"
    return [f"The Hugging Face part alone ({which}; the evaluated vectors need the command above):", "",
            "```python", "from transformers import AutoModel, AutoTokenizer", "",
            f'tokenizer = AutoTokenizer.from_pretrained("{encoder}")',
            f'encoder = AutoModel.from_pretrained("{encoder}")', "```"]


def render_model_card(method: MethodInfo, base_models: tuple[str, ...], note: LoadingNote,
                      training: TrainingFacts | None = None, hf_weights: bool = False,
                      encoder_snippet: bool = True) -> str:
    """The markdown of the card; ``note`` is the export's ``LOADING.md`` text, ``hf_weights`` says the export loads
    with ``AutoModel``, ``encoder_snippet`` shows ``AutoModel`` code for the one frozen encoder it builds on."""
    front = yaml.safe_dump(_front_matter(method, base_models, note, training), sort_keys=False, allow_unicode=True)
    bases = ", ".join(f"`{b}`" for b in base_models) or "unknown"
    lines = ["---", front.rstrip(), "---", "", f"# {method.name} (`{method.key}`)", "",
             f"Trained with sts-lightning (`model={method.key}`) from {bases}.", "", "## Method", "",
             f"- method: {method.name} (`{method.key}`)"]
    lines.append(f"- paper: {method.paper.citation()}" if method.paper is not None else "- paper: none")
    lines += [f"- base model: {bases}", ""]
    lines += _training_section(training)
    lines += ["## How to load", "", loading_body(note.what, note.command, note.sentence_transformers).rstrip(), ""]
    snippet = _snippet(note, base_models if encoder_snippet else (), hf_weights)
    return "\n".join([*lines, *snippet, ""] if snippet else lines)


@dataclass(frozen=True)
class ModelCard:
    """``LOADING.md`` and ``README.md`` of an export: export writers take it where they take a ``LoadingNote``
    and ``write`` it inside their temporary directory, before the manifest, so the manifest lists both."""

    method: MethodInfo
    base_models: tuple[str, ...]
    note: LoadingNote
    training: TrainingFacts | None = None
    encoder_snippet: bool = True  # see render_model_card

    def write(self, folder: str | os.PathLike, shown_as: str | os.PathLike | None = None) -> Path:
        """Write the note and the card, last (``config.json`` tells whether ``AutoModel`` loads it); returns the card."""
        self.note.write(folder, shown_as=shown_as)
        path = Path(folder) / CARD_FILE
        text = render_model_card(self.method, self.base_models, self.note, self.training,
                                 hf_weights=(Path(folder) / "config.json").is_file(),
                                 encoder_snippet=self.encoder_snippet)
        atomic_write(path, text.encode())
        return path


ExportNotes = LoadingNote | ModelCard  # what export writers accept: a ModelCard also writes its LoadingNote
