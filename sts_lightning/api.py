"""The Python API: ``sts_lightning.load(anything evaluate.py accepts)`` -> ``encode`` / ``similarity`` / ``evaluate``.

It composes ``configs/evaluate.yaml`` and builds encoder and scorer with ``evaluate.py``'s functions, so the scores
in Python are the ones ``evaluate.py`` prints; an export is scored as its ``LOADING.md`` says.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, open_dict

from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.errors import ConfigError, user_errors
from sts_lightning.embeddings.io.export_note import NOTE_FILE, read_loading_command
from sts_lightning.embeddings.io.package_files import CONFIG_DIR
from sts_lightning.embeddings.scoring.registry import build_scorer, check_scorer_spec
from sts_lightning.embeddings.scoring.scorer import Representation, Scorer
from sts_lightning.embeddings.scoring.shared_pass import share_forward_pass
from sts_lightning.embeddings.scoring.truncated import TruncatedScorer, check_dims, truncate
from sts_lightning.process_state import fresh_hydra
from sts_lightning.runs.constructor_defaults import register as register_constructor_defaults
from sts_lightning.sts.scoring import pair_sentences, score_tasks
from sts_lightning.sts.tasks import load_tasks

ENCODER_OPTIONS = ("max_length", "batch_size", "max_tokens", "packing", "device", "precision")


def _evaluate_config() -> DictConfig:
    """``configs/evaluate.yaml`` as ``evaluate.py`` composes it; a caller's Hydra state set aside and restored."""
    register_constructor_defaults()  # scorer_options are the scorers' own defaults (runs/constructor_defaults.py)
    with fresh_hydra(), initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="evaluate")


def _parse_spec(text: str) -> str | dict:
    """An ``evaluate.py`` scorer spec (``mean``, ``{name:flow,path:/x}``) as the Python value Hydra gives it."""
    return OverridesParser.create().parse_override(f"scorers=[{text}]").value()[0]


def _overrides_as_options(overrides: Sequence[str]) -> dict[str, Any]:
    """``encoder.max_length=32`` (the extra overrides of a loading note) -> ``{"max_length": 32}``."""
    options: dict[str, Any] = {}
    for item in overrides:
        key, _, value = item.partition("=")
        if not key.startswith("encoder.") or key[len("encoder."):] not in ENCODER_OPTIONS:
            raise ConfigError(f"loading note override {item!r} is not an encoder option ({', '.join(ENCODER_OPTIONS)})")
        options[key[len("encoder."):]] = OverridesParser.create().parse_override(item).value()
    return options


def resolve(source: str | Path | Mapping, scorer: str | Mapping | None = None,
            encoder: str | None = None) -> tuple[str, str | dict, dict[str, Any]]:
    """``(encoder name, scorer spec, encoder options)`` for ``source``, as ``evaluate.py`` would be called."""
    if isinstance(source, Mapping):
        return str(encoder or "none"), dict(source), {}
    path = Path(str(source)).expanduser()
    if (path / NOTE_FILE).is_file():
        encoders, spec, extra = read_loading_command(path)
        return encoders[0], (scorer if scorer is not None else _parse_spec(spec)), _overrides_as_options(extra)
    return str(encoder or source), (scorer if scorer is not None else "mean"), {}


class SentenceModel:
    """One encoder (``None`` for encoder-free scorers) and one scorer, as one row of ``evaluate.py``'s table."""

    def __init__(self, encoder, scorer: Scorer, config: DictConfig) -> None:
        self.encoder = encoder
        self.scorer = scorer  # a TruncatedScorer when loaded with ``dim``
        self._config = config

    def __repr__(self) -> str:
        name = getattr(self.encoder, "name", "none")
        return f"SentenceModel(encoder={name!r}, scorer={self.scorer.name!r})"

    def encode(self, sentences: str | Sequence[str]) -> torch.Tensor | Representation:
        """One row per sentence: a ``(n, d)`` tensor where the representation is a vector, else the dict."""
        rep = self.scorer.represent([sentences] if isinstance(sentences, str) else list(sentences))
        return rep["embedding"] if set(rep) == {"embedding"} else rep

    def similarity(self, a: str | Sequence[str], b: str | Sequence[str]) -> torch.Tensor | float:
        """The method's similarity of each pair ``(a[i], b[i])`` (cosine, Jensen-Shannon, ... as evaluated)."""
        single = isinstance(a, str) and isinstance(b, str)
        first = [a] if isinstance(a, str) else list(a)
        second = [b] if isinstance(b, str) else list(b)
        sims = self.scorer.score_pairs(first, second)
        return float(sims[0]) if single else sims

    def evaluate(self, tasks: str | Sequence[str] | None = None, data_dir: str | Path | None = None,
                 source: str = "local") -> dict[str, dict]:
        """Spearman / Pearson (x100) per task, exactly as ``evaluate.py`` scores this encoder and scorer."""
        names = list(self._config.tasks) if tasks is None else ([tasks] if isinstance(tasks, str) else list(tasks))
        loaded = load_tasks(names, data_dir if data_dir is not None else self._config.paths.data_dir, source)
        sentences = pair_sentences(loaded)  # evaluate.py's order: the same batches, the same numbers
        full = self.scorer.inner if isinstance(self.scorer, TruncatedScorer) else self.scorer
        scorer = share_forward_pass(self.encoder, [full], sentences)[0] if self.encoder is not None else full
        if full is not self.scorer:  # evaluate.py's `dims` row: the shared pass's vectors, cut
            scorer = TruncatedScorer(scorer, self.scorer.dim)
        return score_tasks(scorer, loaded)


@user_errors
def load(source: str | Path | Mapping, scorer: str | Mapping | None = None, *, encoder: str | None = None,
         dim: int | None = None, **options: Any) -> SentenceModel:
    """Load anything ``evaluate.py`` accepts (README.md's examples), e.g. a scorer-spec mapping with its encoder:
    ``load({"name": "flow", "path": "outputs/flow/export"}, encoder="all-MiniLM-L6-v2")``. ``scorer`` replaces the
    default (``mean``, or the export's own); ``dim``: the first ``dim`` numbers (evaluate.py ``dims``);
    ``**options`` are ``evaluate.yaml``'s encoder options (``max_length``, ``batch_size``, ``device``, ...).
    """
    unknown = set(options) - set(ENCODER_OPTIONS)
    if unknown:
        raise ConfigError(f"load(): unknown option(s) {sorted(unknown)}; valid: {', '.join(ENCODER_OPTIONS)}")
    encoder_name, spec, note_options = resolve(source, scorer, encoder)
    cfg = _evaluate_config()
    with open_dict(cfg):
        cfg.encoder = OmegaConf.merge(cfg.encoder, {**note_options, **options})
    scorer_defaults = OmegaConf.to_container(cfg.scorer_options, resolve=True)
    check_scorer_spec(spec, scorer_defaults)  # a misspelt scorer: one line before a model loads
    (dim,) = check_dims(dim, "load(dim)") or (None,)
    enc_opts = OmegaConf.to_container(cfg.encoder, resolve=True)
    built_encoder = None if encoder_name == "none" else load_encoder(encoder_name, **enc_opts)
    built = build_scorer(spec, built_encoder, scorer_defaults)
    return SentenceModel(built_encoder, built if dim is None else truncate(built, dim), cfg)
