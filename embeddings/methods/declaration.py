"""A method's declaration: every fact about a method that the framework needs before torch loads, in its folder.

Each method folder's ``__init__.py`` sets ``METHOD = MethodDeclaration(...)`` (``METHODS = (...)`` where one folder
holds two); ``embeddings.methods.registry`` collects them. Tests, run labels, cards, ``--help``, the README's table
and the config checks (its argument rules, its own checks, its backbone keys, its Matryoshka facts) read them, so
shared code names no method. Plain values only, no torch: code is named as ``"module:name"`` strings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sts_lightning.embeddings.methods.rules import Rule

KINDS = ("trained", "training-free")
ST_EXPORT = "sentence-transformers"  # the export is a SentenceTransformer directory
HF_EXPORT = "transformers"  # Hugging Face weights plus our own files (no sentence-transformers form)
CE_EXPORT = "cross-encoder"  # a pair model: sentence_transformers.CrossEncoder(export) loads it, scores pairs
NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
TARGET = re.compile(r"[\w.]+:\w+\Z")
MATRYOSHKA_REFUSED = "has no one-vector loss to apply to each prefix"  # the reason when a method gives none


@dataclass(frozen=True)
class Paper:
    """The publication a method implements, as cards and the README cite it."""

    title: str
    authors: str
    venue: str
    year: int
    url: str

    def citation(self) -> str:
        return f"{self.authors} ({self.year}). *{self.title}*. {self.venue}. <{self.url}>"

    def short(self) -> str:
        """``Reimers and Gurevych 2019``-style: first author's surname, ``et al.`` beyond two."""
        surnames = [a.strip().split()[-1] for a in self.authors.split(",")]
        who = surnames[0] if len(surnames) == 1 else " and ".join(surnames) if len(surnames) == 2 \
            else f"{surnames[0]} et al."
        return f"{who} {self.year}"


@dataclass(frozen=True)
class MethodInfo:
    """What a model card says about the method that made an export: ``key`` (its ``configs/model`` name, also a
    tag), a readable ``name`` and its ``paper`` (``None`` for plain fine-tuning without one)."""

    key: str
    name: str
    paper: Paper | None = None


@dataclass(frozen=True)
class ScorerGroup:
    """Scorer names that share one class, with what ``--help`` says about them.

    ``options``: the class's ``__init__`` keywords but ``encoder`` (and ``pooling`` for pooling names);
    ``required``: those without a default. Declared so that ``--help`` imports no torch; a test checks them
    against the class signature.
    """

    names: tuple[str, ...]
    target: str  # "module:Class"
    summary: str
    options: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    encoder_free: bool = False  # brings its own sentence sources: usable with evaluate.py encoders=[none]
    check: str = ""  # "module:function" called with a scorer spec's options before any model loads
    note: str = ""  # a last sentence for --help (e.g. the names an option takes)


def _frozen(mapping: Mapping | None = None) -> Mapping:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Tiny:
    """What the generic tests swap in to run the method on the tiny fixtures in seconds.

    ``data`` / ``model``: Hydra overrides for its data group and its nets; ``{model_dir}`` (the tiny model)
    and ``{cache_dir}`` (a private cache) are filled in by the tests. ``options``: further override sets the
    ``fast_dev_run`` test runs (the method's options). ``ddp``: the 2-rank DDP test's cases, id suffix ->
    extra overrides (empty: no DDP test, the method has no cross-rank step of its own).
    """

    data: tuple[str, ...] = ()
    model: tuple[str, ...] = ()
    options: tuple[tuple[str, ...], ...] = ()
    ddp: Mapping[str, tuple[str, ...]] = field(default_factory=_frozen)

    def overrides(self, model_dir: object, cache_dir: object) -> list[str]:
        """``data`` then ``model`` with the placeholders filled in."""
        return [o.replace("{model_dir}", str(model_dir)).replace("{cache_dir}", str(cache_dir))
                for o in (*self.data, *self.model)]


@dataclass(frozen=True)
class MethodDeclaration:
    """One method, declared once (see the module docstring).

    ``export`` is ``"sentence-transformers"``, ``"transformers"``, ``"cross-encoder"``, a fitted export's format tag or ``""``
    (training-free); ``module`` is ``"sts_lightning.lightning_modules.x:Class"``; ``aliases`` are former names that
    run labels map to ``name``; ``variants`` give card title and paper per value of an option that changes the paper.
    ``rules`` range the method's own ``model.<name>`` numbers (shared names such as ``lr`` live in
    ``lightning_modules.arg_rules``); ``checks`` are ``"module:function"`` called with the composed config before
    torch loads; ``backbones`` are config keys that name models; ``training_only_head`` is the ``(option, value,
    fix)`` of a head the loss reads and the export drops.
    """

    name: str
    title: str
    kind: str
    summary: str
    paper: Paper | None = None
    export: str = ""
    data: str | None = None
    module: str | None = None
    scorers: tuple[ScorerGroup, ...] = ()
    tiny: Tiny = field(default_factory=Tiny)
    aliases: tuple[str, ...] = ()
    variants: Mapping[str, tuple[str, Paper]] = field(default_factory=_frozen)
    evaluate: str = ""
    rules: Mapping[str, Rule] = field(default_factory=_frozen)
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=_frozen)
    checks: tuple[str, ...] = ()
    backbones: tuple[str, ...] = ()
    matryoshka_ok: bool = False
    matryoshka_refused: str = MATRYOSHKA_REFUSED
    training_only_head: tuple[str, str, str] | None = None

    def __post_init__(self) -> None:
        problems = []
        if not NAME.match(self.name):
            problems.append(f"name {self.name!r} is not a lower-case identifier")
        if self.kind not in KINDS:
            problems.append(f"kind {self.kind!r} is not one of {KINDS}")
        if self.kind == "trained" and not (self.module and TARGET.match(self.module) and self.data and self.export):
            problems.append("a trained method needs module ('pkg.module:Class'), data and export")
        if self.kind == "training-free" and not self.evaluate:
            problems.append("a training-free method needs its evaluate.py line")
        problems += [f"scorer target {g.target!r} is not 'module:Class'" for g in self.scorers if not TARGET.match(g.target)]
        problems += [f"check {c!r} is not 'module:function'" for c in (*self.checks, *(g.check for g in self.scorers
                                                                                     if g.check)) if not TARGET.match(c)]
        if problems:
            raise ValueError(f"method {self.name!r}: " + "; ".join(problems))

    @property
    def trained(self) -> bool:
        return self.kind == "trained"

    @property
    def citation(self) -> str:
        return self.paper.citation() if self.paper is not None else ""

    @property
    def st_export(self) -> bool:
        """Its export is a sentence-transformers directory (``SentenceTransformer(export)`` loads it)."""
        return self.export == ST_EXPORT

    @property
    def pair_export(self) -> bool:
        """Its export scores pairs (``CrossEncoder(export).predict`` loads it), not sentences."""
        return self.export == CE_EXPORT

    def card(self, variant: str | None = None) -> MethodInfo:
        """What its model card names: title and paper, those of ``variant`` where it has its own."""
        title, paper = self.variants.get(variant, (self.title, self.paper)) if variant else (self.title, self.paper)
        return MethodInfo(self.name, title, paper)

    def scorer_classes(self) -> dict[str, str]:
        """``{scorer name: "module:Class"}`` of the scorers it offers."""
        return {name: group.target for group in self.scorers for name in group.names}

    def command(self) -> str:
        """How a user runs it: ``python train.py model=<name>``, or its ``evaluate.py`` line."""
        return f"python train.py model={self.name}" if self.trained else self.evaluate
