"""The tests mirror the tree, and no test module imports another (issue 28).

Why: ``tests/<folder>/<sub>/test_<module>.py`` is where a reader looks for a module's tests and where a new
test goes; a file named for nothing in the tree hides what it covers. A module too big for one test file may
have several, named ``test_<module>_<aspect>.py``. Tests of the test tooling sit beside it (``tests/layering.py``
-> ``tests/test_layering.py``). Tests that are about no one module (a run end to end, every config file) are
listed in ``CROSS_CUTTING`` with the reason.

Test modules share code through ``tests/helpers.py`` (plain functions and constants), ``tests/method_cases.py``
(the method-generic tests' cases and model-file checks) and ``conftest.py`` (fixtures), never by importing each
other or a conftest.py: an import runs the other file's module-level code and ties the two files' names together,
and pytest loads conftest.py files itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import ROOT

TESTS = ROOT / "tests"

CROSS_CUTTING = {
    # every config file, every method: generated from configs/ (and the method declarations)
    "tests/runs/test_configs_compose.py": "every configs/experiment file composes with train.yaml",
    "tests/runs/test_debug_configs.py": "every configs/debug file wins over the model and experiment, and runs",
    "tests/runs/test_fast_dev_run.py": "every experiment and config-group option runs fast_dev_run end to end",
    "tests/runs/test_model_defaults.py": "every configs/model file trains with its defaults end to end",
    "tests/runs/test_model_cards.py": "every trainable method exports a model card end to end",
    "tests/runs/test_ddp_train.py": "every in-batch method on 2 CPU DDP ranks end to end",
    "tests/runs/test_bf16_training.py": "every trainable method takes bf16-mixed steps end to end",
    "tests/lightning_modules/test_export_roundtrip.py": "every exporting method loads back as it was evaluated",
    "tests/lightning_modules/test_fitted_on.py": "every fitted export refuses another encoder",
    "tests/embeddings/io/test_legacy_exports.py": "every method's pre-issue-17 export still loads and scores",
    "tests/test_tree_mirror.py": "checks the tests/ tree itself",
    # a run end to end: train_run, callbacks, checkpoint_io, evaluate_run together
    "tests/runs/test_resume.py": "a killed run resumed vs. an uninterrupted one (issue 18)",
    "tests/runs/test_mixture_train.py": "train(cfg) on a mixture of two triplet files: datamodule, early checks, mnrl",
    "tests/runs/test_faults.py": "unsafe or damaged checkpoints and what a run does with them (issue 18)",
    "tests/runs/test_fault_injection.py": "real kills in subprocesses (issue 18)",
    "tests/runs/test_disk_full.py": "a full disk at train.py / evaluate.py's writes, seen as a user does (issue 30)",
    "tests/runs/test_preemption.py": "SIGTERM / SIGUSR1 to train.py, one process and one rank of two (issue 30)",
    "tests/runs/test_dying_rank.py": "a rank of a 2-rank train.py killed or hung; the others stop, the run resumes",
    "tests/runs/test_several_nodes.py": "two torchrun nodes running train.py on one host (issue 30)",
    "tests/runs/test_evaluate_trained.py": "evaluate.py on what train.py produces",
    "tests/runs/test_new_option_errors.py": "bad values of issue 41's options through train.py / evaluate.py's early checks",
    "tests/runs/test_cold_cache.py": "the same train.py command on an empty and a warm cache (issue 38)",
    "tests/runs/test_integration_sentence_transformers.py": "our STS-B score against sentence-transformers' evaluator",
    "tests/test_docs.py": "the README and docs/ stay true: links resolve, code excerpts are real",
    "tests/test_planted_method.py": "a planted method is picked up by every generic test",
}

def all_test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def mirrored_module(test: Path, root: Path = ROOT) -> Path | None:
    """The module ``test`` is named for: ``test_<m>.py`` or ``test_<m>_<aspect>.py`` in the mirrored folder."""
    rel = test.relative_to(root / "tests")
    name = rel.stem[len("test_"):]
    for folder in (root / rel.parent, root / "tests" / rel.parent):  # the tree, or the test tooling beside it
        for module in sorted(folder.glob("*.py")) if folder.is_dir() else []:
            if module.stem != "__init__" and (name == module.stem or name.startswith(module.stem + "_")):
                return module
    return None


def test_every_test_file_mirrors_a_module_or_says_why_not():
    unmapped = [str(t.relative_to(ROOT)) for t in all_test_files() if mirrored_module(t) is None]
    assert [t for t in unmapped if t not in CROSS_CUTTING] == [], "name it test_<module>.py in the mirrored folder"


def test_the_mapping_on_a_planted_tree(tmp_path):
    for path in ("sts/tasks.py", "evaluate.py", "tests/layering.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    mapped = {"tests/sts/test_tasks.py": "sts/tasks.py", "tests/sts/test_tasks_groups.py": "sts/tasks.py",
              "tests/test_evaluate.py": "evaluate.py", "tests/test_layering.py": "tests/layering.py",
              "tests/sts/test_task.py": None, "tests/sts/test_tasksgroups.py": None, "tests/runs/test_tasks.py": None}
    got = {t: mirrored_module(tmp_path / t, tmp_path) for t in mapped}
    assert {t: m and str(m.relative_to(tmp_path)) for t, m in got.items()} == mapped


def test_the_cross_cutting_list_names_existing_files():
    assert [p for p in CROSS_CUTTING if not (ROOT / p).is_file()] == []


def _imported_test_files(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        for name in names:
            target = ROOT / (name.replace(".", "/") + ".py")
            shared = target.name.startswith("test_") or target.name == "conftest.py"
            if name.startswith("tests.") and shared and target.is_file():
                found.add(str(target.relative_to(ROOT)))
    return found


def test_no_test_module_imports_another():
    imports = {(str(p.relative_to(ROOT)), t) for p in sorted(TESTS.rglob("*.py")) for t in _imported_test_files(p)}
    assert sorted(imports) == [], "share it through tests/helpers.py, tests/method_cases.py or a conftest.py fixture"
