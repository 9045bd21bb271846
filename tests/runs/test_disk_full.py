"""A full disk during ``python train.py`` / ``evaluate.py``, seen as a user sees it: exit code and stderr (issue 30).

Each run is ``train.py`` (or ``evaluate.py``) in a process of its own, through Hydra and ``run_or_exit``, with the
disk filling up at one kind of write (``FAULT_ENOSPC``, installed by ``tests/runs/fault_driver.py --script``:
no tmpfs without root, so the writes are patched, ``tests/disk_quota.py``). Each test checks what is left: the
previous checkpoint / export whole (SHA-256 of the last copy renamed into place, or the export's manifest), no
temporary file anywhere, the exit code ``EXIT_DISK_FULL`` (74) and ONE ``error:`` line naming the path, the bytes
needed and the bytes free on its mount -- no traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sts_lightning.embeddings.errors import EXIT_DISK_FULL
from sts_lightning.embeddings.io.atomic import ORPHAN
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint
from sts_lightning.embeddings.io.export_manifest import MANIFEST_FILE, verify_export

pytestmark = pytest.mark.slow  # train.py in subprocesses: 10-25 s each on 2 shared cores
ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^error: no space left on device writing (?P<path>\S+): needs (?P<need>~[\d.]+ [kMGT]?B|more space|more "
                  r"than [\d.]+ [kMGT]?B), [\d.]+ [kMGT]?B free on /\S*$")


def _tiny(out: Path, model_dir: Path, data_dir: Path) -> list[str]:
    """``tests.helpers.compose_train_config``'s settings, as a user types them; 4 steps, last.ckpt after each."""
    return [f"hydra.run.dir={out}", f"paths.data_dir={data_dir}", f"model.model_name_or_path={model_dir}",
            "model.max_length=32", "model.eval_batch_size=8", "data.batch_size=4", "data.sources=[snli:dev,sick:trial]",
            "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
            "callbacks.sts_evaluation.batch_size=8", "callbacks.sts_evaluation.tasks=[stsb-dev]",
            "trainer.max_epochs=1", "trainer.deterministic=true", "export=true",
            "callbacks.last_checkpoint.every_n_train_steps=1"]


def _run(script: str, args: list[str], tmp_path: Path, enospc: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled", "STS_CACHE_DIR": str(tmp_path / "cache"),
           "FAULT_RENAMES": str(tmp_path / "renames.jsonl")}
    env.pop("FAULT_ENOSPC", None)
    if enospc:
        env["FAULT_ENOSPC"] = enospc
    return subprocess.run([sys.executable, "-m", "tests.runs.fault_driver", "--script", script, *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


def _one_line(proc: subprocess.CompletedProcess, path: Path) -> str:
    """The run's one error line (checked: naming ``path``, exit code 74, no traceback); returns its "needs"."""
    assert proc.returncode == EXIT_DISK_FULL, f"exit {proc.returncode}:\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and proc.stderr.rstrip().endswith(errors[0]), proc.stderr[-3000:]
    found = LINE.match(errors[0])
    assert found and found["path"] == str(path), errors[0]
    print(f"exit {proc.returncode}: {errors[0]}")  # shown with pytest -s: what the user reads
    return found["need"]


def _bytes(need: str) -> float:
    """``"~331.1 kB"`` -> 331100.0."""
    number, unit = need.lstrip("~").removeprefix("more than ").split()
    return float(number) * 1000 ** ["B", "kB", "MB", "GB", "TB"].index(unit)


def _leftovers(*roots: Path) -> list[str]:
    return [str(p) for root in roots if root.exists() for p in root.rglob("*")
            if ORPHAN.match(p.name) or re.search(r"\.tmp\b", p.name)]


def _last_renamed(tmp_path: Path, target: Path) -> str:
    """SHA-256 of the last whole copy of ``target`` that was renamed into place."""
    lines = (tmp_path / "renames.jsonl").read_text().splitlines()
    return [e["sha256"] for e in map(json.loads, lines) if e["target"] == str(target.resolve())][-1]


def test_enospc_at_a_checkpoint_keeps_the_previous_last_ckpt(tmp_path, tiny_model_dir, train_data_dir):
    """The third ``last.ckpt`` (step 3) hits a full disk 4 kB in: step 2's stays, byte for byte."""
    out = tmp_path / "run"
    proc = _run("train.py", _tiny(out, tiny_model_dir, train_data_dir), tmp_path, enospc="last.ckpt:2:4096")
    last = out / "checkpoints" / "last.ckpt"
    need = _one_line(proc, last)  # the bytes of the checkpoint's tensors: within 5% of a whole checkpoint's size
    assert need.startswith("~") and abs(_bytes(need) / last.stat().st_size - 1) < 0.05, need
    assert hashlib.sha256(last.read_bytes()).hexdigest() == _last_renamed(tmp_path, last)
    assert load_checkpoint(last)["global_step"] == 2
    assert _leftovers(out) == [] and not (out / "export").exists()


def test_enospc_at_an_export_keeps_the_previous_export(tmp_path, tiny_model_dir, train_data_dir):
    """A finished run resumed (``ckpt_path=last``) exports again onto a full disk: the first export stays."""
    out = tmp_path / "run"
    args = _tiny(out, tiny_model_dir, train_data_dir)
    assert _run("train.py", args, tmp_path).returncode == 0
    manifest = (out / "export" / MANIFEST_FILE).read_text()
    proc = _run("train.py", [*args, "ckpt_path=last"], tmp_path, enospc=".export.tmp-:0:1000")
    need = _one_line(proc, out / "export")  # the exported weights (or the previous export): within 5% of its size
    size = sum(p.stat().st_size for p in (out / "export").rglob("*") if p.is_file())
    assert need.startswith("~") and abs(_bytes(need) / size - 1) < 0.05, (need, size)
    assert (out / "export" / MANIFEST_FILE).read_text() == manifest and verify_export(out / "export") is True
    assert _leftovers(out) == []


FLOW = ["model=flow", "data=cached_embeddings", "data.batch_size=8", "+trainer.limit_train_batches=3",
        "model.max_length=32", "model.eval_batch_size=8", "callbacks.sts_evaluation.batch_size=8",
        "callbacks.sts_evaluation.tasks=[stsb-dev]", "trainer.max_epochs=1", "trainer.enable_progress_bar=false"]


@pytest.mark.parametrize("kind", ["features", "sentence-index"])
def test_enospc_at_a_cache_leaves_no_half_cache(tmp_path, tiny_model_dir, train_data_dir, kind):
    """BERT-flow's caches on a full disk, from inside Lightning's ``prepare_data``: the frozen-feature cache (a
    memory map, allocated up front: refused with its exact size before any encoding) and the sentence index of
    its Wikipedia file (its spans' size)."""
    out, cache = tmp_path / "run", tmp_path / "cache-dir"
    proc = _run("train.py", [*FLOW, f"hydra.run.dir={out}", f"model.model_name_or_path={tiny_model_dir}",
                             f"paths.data_dir={train_data_dir}", f"data.cache_dir={cache}"], tmp_path,
                enospc=f"/{kind}/:0:64")
    line = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    found = LINE.match(line[0]) if line else None
    assert found and Path(found["path"]).parent == cache / kind, proc.stderr[-3000:]
    assert _one_line(proc, Path(found["path"])).startswith("~")
    assert list((cache / kind).iterdir()) == [] and _leftovers(out, cache) == []


def test_enospc_at_evaluate_results_keeps_the_previous_results(tmp_path, tiny_model_dir, tiny_data_dir):
    out = tmp_path / "eval"
    args = [f"hydra.run.dir={out}", f"encoders=[{tiny_model_dir}]", "scorers=[mean]", f"paths.data_dir={tiny_data_dir}",
            "tasks=[stsb-dev]"]
    assert _run("evaluate.py", args, tmp_path).returncode == 0
    before = (out / "results.json").read_bytes()
    proc = _run("evaluate.py", args, tmp_path, enospc="results.json:0:10")
    assert _one_line(proc, out / "results.json").startswith("~")  # the exact size of the JSON
    assert (out / "results.json").read_bytes() == before and _leftovers(out) == []


def test_enospc_at_a_write_outside_the_atomic_helpers_is_one_line_too(tmp_path, tiny_model_dir, train_data_dir):
    """The CSV logger's ``metrics.csv`` (Lightning's own write, not ours): the same one line and exit code; the
    size it needs is not known, so the line says so."""
    out = tmp_path / "run"
    proc = _run("train.py", _tiny(out, tiny_model_dir, train_data_dir), tmp_path, enospc="metrics.csv:0:100")
    assert _one_line(proc, next(out.rglob("metrics.csv"))) == "more space"
    assert load_checkpoint(out / "checkpoints" / "last.ckpt")["global_step"] >= 1  # the checkpoints are untouched
