"""Layering check (issue 17): packages import only their own package or lower layers, with no cycles.

Rules and kinds are in `tests/layering.py`; the real tree must have no violation at all (no allowlist), and the
planted trees below show that each rule fires.
"""
from __future__ import annotations

from pathlib import Path

from tests.layering import Violation, check_source, check_tree, repo_files

ROOT = Path(__file__).resolve().parents[1]

def _current() -> set[Violation]:
    return check_tree(repo_files(ROOT))


def test_the_tree_keeps_the_layering():
    found = sorted(_current())
    assert not found, "imports that break the layering (rules in tests/layering.py):\n" + "\n".join(map(str, found))


def test_finds_the_cycles_architecture_md_names():
    # The import lines as architecture.md found them (checked in memory, so this test outlives their fixes).
    tree = {
        "embeddings/methods/flow/scorer.py": "from sts_lightning.lightning_modules.glow import Glow\n",
        "embeddings/sources/sentence_source.py": ("class S:\n    def fingerprint(self):\n"
                                          "        from sts_lightning.datamodules.cached_embeddings import model_fingerprint\n"),
        "lightning_modules/ct.py": "from sts_lightning.callbacks.sts_evaluation import STSEvaluationCallback\n",
        "runs/train_run.py": "def f():\n    from sts_lightning.runs.pipeline_run import run\n",
    }
    assert check_tree(tree) == {
        Violation("embeddings/methods/flow/scorer.py", "sts_lightning.lightning_modules.glow", "upward"),
        Violation("embeddings/sources/sentence_source.py", "sts_lightning.datamodules.cached_embeddings", "upward"),
        Violation("embeddings/sources/sentence_source.py", "sts_lightning.datamodules.cached_embeddings", "in-function"),
        Violation("lightning_modules/ct.py", "sts_lightning.callbacks.sts_evaluation", "sideways"),
        Violation("runs/train_run.py", "sts_lightning.runs.pipeline_run", "in-function"),
    }


def test_planted_upward_imports_are_reported():
    tree = {
        "embeddings/x.py": "from sts_lightning.lightning_modules.base import EncoderModule\n",
        "lightning_modules/y.py": "import callbacks.z\n",
        "sts/z.py": "def f():\n    import datamodules.nli\n",
        "embeddings/ok.py": "import numpy\nfrom embeddings.methods.pooling import get_pooling\n",
        "datamodules/ok.py": "from sts_lightning.sts.tasks import x\nfrom embeddings.io import atomic\n",
        "train.py": "from sts_lightning.lightning_modules.base import EncoderModule\nfrom callbacks import z\n",
    }
    assert check_tree(tree) == {
        Violation("embeddings/x.py", "sts_lightning.lightning_modules.base", "upward"),
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
    from sts_lightning.callbacks.sts_evaluation import STSEvaluationCallback
    from sts_lightning.embeddings.scoring.protocols import STSEvaluator

    assert isinstance(STSEvaluationCallback(tasks=["stsb-dev"]), STSEvaluator)


def test_module_cycles_and_deferred_entry_point_imports():
    tree = {
        "embeddings/__init__.py": "",
        "embeddings/a.py": "from sts_lightning.embeddings.b import x\n",
        "embeddings/b.py": "from embeddings import a\n",
        "runs/p.py": "from runs import t\n",
        "runs/t.py": "import runs.p\n",
        "train.py": "def main():\n    from sts_lightning.runs.launch import launch\n",
        "evaluate.py": "def main():\n    from sts_lightning.embeddings.encoders.load import load_encoder\n",
    }
    assert check_tree(tree) == {
        Violation("embeddings/a.py", "embeddings.a -> embeddings.b -> embeddings.a", "cycle"),
        Violation("runs/p.py", "runs.p -> runs.t -> runs.p", "cycle"),
        Violation("evaluate.py", "sts_lightning.embeddings.encoders.load", "in-function"),  # only the runs.* import is exempt
    }
