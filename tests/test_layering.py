"""Layering check (issue 17, step 1): packages import only their own package or lower layers.

Rules and kinds are in `tests/layering.py`. Today's tree breaks some of them; every such import is listed in
KNOWN_VIOLATIONS. The test fails on a violation not listed AND on a listed one that no longer occurs, so the
list can only shrink: remove an entry in the commit that removes its import.
"""
from __future__ import annotations

from pathlib import Path

from tests.layering import Violation, check_source, check_tree, repo_files

ROOT = Path(__file__).resolve().parents[1]

# (file, imported module, kind): one line each, why it is there today.
KNOWN_VIOLATIONS: set[tuple[str, str, str]] = {
    ("benchmarks/cooccurrence_ceiling.py", "embeddings.encoders.packaged", "in-function"),  # lazy first-party import
    ("benchmarks/embedding_geometry.py", "embeddings.encoders.checkpoint", "in-function"),  # lazy first-party import
    ("benchmarks/embedding_geometry.py", "embeddings.encoders.hf", "in-function"),  # lazy first-party import
    ("benchmarks/embedding_geometry.py", "embeddings.methods.pooling", "in-function"),  # lazy first-party import
    ("benchmarks/latte_mix_layers.py", "datamodules.token_states", "in-function"),  # lazy first-party import
    ("benchmarks/latte_mix_sweep.py", "datamodules.token_states", "in-function"),  # lazy first-party import
    ("benchmarks/latte_mix_sweep.py", "lightning_modules.latte_mix", "in-function"),  # lazy first-party import
    ("benchmarks/token_cache_speed.py", "lightning_modules.latte_mix", "in-function"),  # lazy first-party import
    ("datamodules/sentence_files.py", "sts.tasks", "in-function"),  # lazy first-party import
    ("datamodules/token_states.py", "datamodules.nli_readers", "in-function"),  # lazy first-party import
    ("datamodules/token_states.py", "embeddings.encoders.load", "in-function"),  # lazy first-party import
    ("embeddings/io/atomic.py", "embeddings.errors", "in-function"),  # lazy first-party import
    ("embeddings/methods/flow/scorer.py", "embeddings.encoders.load", "in-function"),  # lazy first-party import
    ("embeddings/encoders/hf.py", "embeddings.encoders.packaged", "in-function"),  # lazy first-party import
    ("embeddings/methods/latte_mix/scorer.py", "embeddings.io.atomic", "in-function"),  # lazy first-party import
    ("embeddings/methods/latte_mix/scorer.py", "embeddings.encoders.load", "in-function"),  # lazy first-party import
    ("embeddings/encoders/load.py", "embeddings.encoders.checkpoint", "in-function"),  # lazy first-party import
    ("embeddings/encoders/load.py", "embeddings.encoders.hf", "in-function"),  # lazy first-party import
    ("runs/fit_meta.py", "lightning_modules.cross_view_ae", "in-function"),  # lazy first-party import
    ("embeddings/methods/meta/scorer.py", "datamodules.sentence_files", "in-function"),  # lazy first-party import
    ("embeddings/methods/meta/scorer.py", "datamodules.sentence_files", "upward"),  # meta export reads sentence files via datamodules
    ("embeddings/methods/meta/scorer.py", "embeddings.io.export_note", "in-function"),  # lazy first-party import
    ("embeddings/methods/meta/scorer.py", "embeddings.sources.cache", "in-function"),  # lazy first-party import
    ("embeddings/sources/sentence_source.py", "embeddings.encoders.load", "in-function"),  # lazy first-party import
    ("embeddings/sources/sentence_source.py", "embeddings.methods.meta.scorer", "in-function"),  # module cycle meta_scorer <-> sentence_source
    ("embeddings/sources/sentence_source.py", "embeddings.methods.pooling", "in-function"),  # lazy first-party import
    ("embeddings/encoders/static.py", "embeddings.encoders.packaged", "in-function"),  # lazy first-party import
    ("evaluate.py", "runs.evaluate_run", "in-function"),  # lazy so --help stays fast
    ("lightning_modules/cross_view_ae.py", "embeddings.methods.meta.scorer", "in-function"),  # lazy first-party import
    ("lightning_modules/cross_view_ae.py", "embeddings.sources.sentence_source", "in-function"),  # lazy first-party import
    ("lightning_modules/flow.py", "embeddings.encoders.load", "in-function"),  # lazy first-party import
    ("lightning_modules/flow.py", "embeddings.encoders.packaged", "in-function"),  # lazy first-party import
    ("lightning_modules/frozen_encoder.py", "embeddings.errors", "in-function"),  # lazy first-party import
    ("lightning_modules/frozen_encoder.py", "embeddings.encoders.load", "in-function"),  # lazy first-party import
    ("runs/pipeline_run.py", "embeddings.encoders.load", "in-function"),  # lazy first-party import
    ("runs/pipeline_run.py", "embeddings.methods.meta.scorer", "in-function"),  # lazy first-party import
    ("runs/pipeline_run.py", "embeddings.methods.pooling", "in-function"),  # lazy first-party import
    ("runs/pipeline_run.py", "embeddings.sources.sentence_source", "in-function"),  # lazy first-party import
    ("runs/pipeline_run.py", "runs.train_run", "in-function"),  # module cycle train_run <-> pipeline_run
    ("runs/pipeline_run.py", "sts.scoring", "in-function"),  # lazy first-party import
    ("runs/pipeline_run.py", "sts.tasks", "in-function"),  # lazy first-party import
    ("lightning_modules/latte_mix.py", "embeddings.methods.latte_mix.scorer", "in-function"),  # lazy first-party import
    ("lightning_modules/latte_mix.py", "lightning_modules.flow", "in-function"),  # lazy first-party import
    ("runs/train_run.py", "runs.pipeline_run", "in-function"),  # module cycle train_run <-> pipeline_run
    ("runs/evaluate_run.py", "runs.wandb_report", "in-function"),  # lazy first-party import
    ("sts/tasks.py", "sts.hub", "in-function"),  # lazy first-party import
    ("train.py", "runs.train_run", "in-function"),  # lazy so --help stays fast
}


def _current() -> set[Violation]:
    return check_tree(repo_files(ROOT))


def test_no_new_layering_violations():
    new = sorted(v for v in _current() if tuple(v) not in KNOWN_VIOLATIONS)
    assert not new, "imports that break the layering (tests/layering.py):\n" + "\n".join(map(str, new))


def test_allowlist_only_shrinks():
    current = {tuple(v) for v in _current()}
    stale = sorted(KNOWN_VIOLATIONS - current)
    assert not stale, "fixed violations still in KNOWN_VIOLATIONS (delete them):\n" + "\n".join(map(str, stale))


def test_finds_the_cycles_architecture_md_names():
    # The import lines as architecture.md found them (checked in memory, so this test outlives their fixes).
    tree = {
        "embeddings/methods/flow/scorer.py": "from lightning_modules.glow import Glow\n",
        "embeddings/sources/sentence_source.py": ("class S:\n    def fingerprint(self):\n"
                                          "        from datamodules.cached_embeddings import model_fingerprint\n"),
        "lightning_modules/ct.py": "from callbacks.sts_evaluation import STSEvaluationCallback\n",
        "runs/train_run.py": "def f():\n    from runs.pipeline_run import run\n",
    }
    assert check_tree(tree) == {
        Violation("embeddings/methods/flow/scorer.py", "lightning_modules.glow", "upward"),
        Violation("embeddings/sources/sentence_source.py", "datamodules.cached_embeddings", "upward"),
        Violation("embeddings/sources/sentence_source.py", "datamodules.cached_embeddings", "in-function"),
        Violation("lightning_modules/ct.py", "callbacks.sts_evaluation", "sideways"),
        Violation("runs/train_run.py", "runs.pipeline_run", "in-function"),
    }
    # ... and on the real tree the first one is gone: the Glow nets now live in embeddings/.
    assert ("embeddings/methods/flow/scorer.py", "lightning_modules.glow", "upward") not in {tuple(v) for v in _current()}


def test_planted_upward_imports_are_reported():
    tree = {
        "embeddings/x.py": "from lightning_modules.base import EncoderModule\n",
        "lightning_modules/y.py": "import callbacks.z\n",
        "sts/z.py": "def f():\n    import datamodules.nli\n",
        "embeddings/ok.py": "import numpy\nfrom embeddings.methods.pooling import get_pooling\n",
        "datamodules/ok.py": "from sts.tasks import x\nfrom embeddings.io import atomic\n",
        "train.py": "from lightning_modules.base import EncoderModule\nfrom callbacks import z\n",
    }
    assert check_tree(tree) == {
        Violation("embeddings/x.py", "lightning_modules.base", "upward"),
        Violation("lightning_modules/y.py", "callbacks.z", "sideways"),
        Violation("sts/z.py", "datamodules.nli", "upward"),
        Violation("sts/z.py", "datamodules.nli", "in-function"),
    }


def test_lightning_in_lower_layers_is_reported_anywhere():
    source = "import lightning\n\ndef f():\n    from pytorch_lightning import Trainer\n"
    assert check_source(source, "embeddings/a.py") == {
        Violation("embeddings/a.py", "lightning", "lightning"),
        Violation("embeddings/a.py", "pytorch_lightning", "lightning")}
    assert check_source(source, "sts/a.py") == {
        Violation("sts/a.py", "lightning", "lightning"), Violation("sts/a.py", "pytorch_lightning", "lightning")}
    assert check_source(source, "lightning_modules/a.py") == set()


def test_heavy_third_party_inside_functions_is_fine_and_relative_imports_resolve():
    source = "def f():\n    import onnx\n    from safetensors.torch import load_file\n"
    assert check_source(source, "embeddings/a.py") == set()
    assert check_source("from ..callbacks import z\n", "lightning_modules/a.py") == {
        Violation("lightning_modules/a.py", "callbacks", "sideways")}
    assert check_source("from .pooling import get_pooling\n", "embeddings/a.py") == set()


def test_sts_callback_offers_the_api_ct_finds_it_by():
    # CT no longer imports callbacks/: it finds the STS callback by this protocol (issue 17 layering).
    from callbacks.sts_evaluation import STSEvaluationCallback
    from lightning_modules.ct import STSEvaluator

    assert isinstance(STSEvaluationCallback(tasks=["stsb-dev"]), STSEvaluator)
