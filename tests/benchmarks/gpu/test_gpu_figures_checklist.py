"""benchmarks/gpu/gpu_checklist.sh's cheapest rehearsal path: the machine line, a check cut by its budget, the table.

Why a test of the shell script: it runs once per lent GPU, where a typo costs the call; here its gating
(``GPU_CHECKS``), its budgets (a check over its budget is cut, reported, and the rest go on) and the figures it
writes (``benchmarks/gpu/gpu_figures.py``) run on every test run. The benchmarks it calls have their own tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.paths import ROOT


def test_rehearsal_cuts_an_overrunning_check_and_writes_the_table(tmp_path):
    env = {**os.environ, "GPU_CHECK_DEVICE": "cpu", "GPU_CHECKS": "machine,budget_probe", "GPU_BUDGET_SCALE": "1",
           "SKIP_WHEELS": "1", "PYTHON": sys.executable, "OUT": str(tmp_path / "out"),
           "GPU_RUNS": str(tmp_path / "runs"), "GPU_BUNDLE": str(tmp_path / "no_bundle")}
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu" / "gpu_checklist.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = (tmp_path / "out" / "checklist.log").read_text()
    assert '"card": "none (CPU rehearsal)"' in log
    assert "=== budget_probe CUT after 1 s (its budget)" in log and "=== figures" in log
    checks = [json.loads(line) for line in (tmp_path / "out" / "checks.jsonl").read_text().splitlines()]
    assert [(c["check"], c["rc"]) for c in checks] == [("budget_probe", 124)]
    table = (tmp_path / "out" / "gpu_figures.md").read_text()
    assert "| budget_probe | 124 | " in table and "cut: over its time budget" in table
    assert json.loads((tmp_path / "out" / "gpu_figures.json").read_text())["machine"]["card"] == "none (CPU rehearsal)"
