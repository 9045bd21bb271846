"""``evaluate.py --help`` and ``train.py --help`` name what the code and configs really offer.

The names are taken here from the registries and the YAML files themselves, so adding a scorer, an
encoder, a task or a model without the help following it fails this test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml

from tests.helpers import experiment_names
from tests.paths import CONFIG_DIR, ROOT


def _help(script: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    # -X importtime lists every module imported (on stderr): help must not pay for torch.
    return subprocess.run([sys.executable, "-X", "importtime", script, "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=True)


@pytest.fixture(scope="module")
def evaluate_help() -> subprocess.CompletedProcess:
    return _help("evaluate.py")


@pytest.fixture(scope="module")
def train_help() -> subprocess.CompletedProcess:
    return _help("train.py")


def section(text: str, title: str, until: str = "") -> str:
    """The block of the help that starts with ``title``, up to the next blank line (or line ``until``)."""
    end = rf"\n\n{re.escape(until)}" if until else r"\n\n|\Z"
    match = re.search(rf"^{re.escape(title)}.*?(?={end})", text, flags=re.M | re.S)
    assert match, f"no {title!r} section in:\n{text}"
    return match.group(0)


def has_word(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w/-]){re.escape(name)}(?![\w/-])", text) is not None


def test_evaluate_help_lists_every_scorer_encoder_and_task(evaluate_help):
    from sts_lightning.embeddings.encoders.packaged import PACKAGED_MODELS
    from sts_lightning.embeddings.scoring.registry import SCORER_CLASSES
    from sts_lightning.sts.hub import HUB_TASKS
    from sts_lightning.sts.tasks import LOCAL_TASKS

    text = evaluate_help.stdout
    scorers, encoders, tasks = (section(text, t) for t in ("Scorers", "Encoders", "Tasks"))
    assert [n for n in SCORER_CLASSES if not has_word(scorers, n)] == []
    names = [n for m in PACKAGED_MODELS.values() for n in (m.name, *m.aliases)] + ["none"]
    assert [n for n in names if not has_word(encoders, n)] == []
    assert "*.ckpt" in encoders
    assert [t for t in [*LOCAL_TASKS, *HUB_TASKS] if not has_word(tasks, t)] == []
    options = section(text, "Options", until="Encoders")
    for key in ("encoders:", "scorers:", "tasks:", "data_source:", "batch_size:", "max_length:", "device:",
                "scorer_options:", "threads:", "wandb:"):
        assert key in options
    assert "--cfg,-c" in text  # Hydra's own flags follow


def test_train_help_pairs_every_model_with_its_data_group(train_help):
    text = train_help.stdout
    models = section(text, "Models")
    for path in sorted((CONFIG_DIR / "model").glob("*.yaml")):
        defaults = yaml.safe_load(path.read_text())["defaults"]
        group = next(d["override /data"] for d in defaults if isinstance(d, dict) and "override /data" in d)
        assert re.search(rf"^\s+{path.stem}\s+{group}\s", models, flags=re.M), (path.stem, group, models)
    for title, group in (("Data groups", "data"), ("Trainers", "trainer"), ("Loggers", "logger")):
        block = section(text, title)
        assert [p.stem for p in (CONFIG_DIR / group).glob("*.yaml") if not has_word(block, p.stem)] == []
    # Experiments live in a folder per method: listed as typed, experiment=flow/minilm_l6.
    assert [n for n in experiment_names() if not has_word(section(text, "Experiments"), n)] == []
    assert "flow/minilm_l6" in experiment_names()
    others = section(text, "Other groups")
    assert [p.stem for p in (CONFIG_DIR / "debug").glob("*.yaml") if not has_word(others, p.stem)] == []
    assert "ckpt_path=last" in text and "trainer.num_nodes" in text


@pytest.mark.parametrize("fixture", ["evaluate_help", "train_help"])
def test_help_imports_no_torch(fixture, request):
    imported = {line.rsplit("|", 1)[-1].strip() for line in request.getfixturevalue(fixture).stderr.splitlines()
                if line.startswith("import time:")}
    assert imported and not imported & {"torch", "transformers", "lightning"}


def test_help_names_the_e5_sources_the_code_builds(evaluate_help):
    from sts_lightning.embeddings.sources import build

    assert build.E5_NAMES and all(has_word(section(evaluate_help.stdout, "Scorers"), n) for n in build.E5_NAMES)


@pytest.mark.parametrize(("text", "first"), [
    ("BERT-flow (Li et al. 2020): a Glow. Paper recipe: Adam.", "BERT-flow (Li et al. 2020): a Glow."),
    ("SBERT-WK vectors.\n\nArgs:\n    encoder: x.", "SBERT-WK vectors."),
    ("Compared by Eq. 7. Options follow.", "Compared by Eq. 7."),
])
def test_first_sentence(text, first):
    from sts_lightning.runs.help_text import first_sentence

    assert first_sentence(text) == first
