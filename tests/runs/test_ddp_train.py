"""Every method whose declaration names DDP cases (``tiny.ddp``: those with a cross-rank step of their own, e.g.
in-batch negatives gathered across ranks, moments all-reduced, CT's cached in-batch loss) through ``train()`` on
2 CPU ranks (DDP over gloo): fp32, identical STS metrics. The cases come from the declarations
(``tests/method_cases.py``), never a list here.

Why a subprocess running this file: Lightning's DDP launcher re-runs ``sys.argv`` for rank 1, which must
be a script, not pytest (see tests/callbacks/test_sts_evaluation.py). Why one subprocess for every case: starting
two ranks (imports, gloo) cost most of a case on 2 cores; the script trains the cases in turn, rank 1 (started by
the launcher at the first fit) runs the same cases in the same order, and later fits reuse the process group, as
the seeds of one ``train.py seeds=[...]`` do. Each rank writes what ``train()`` returned, the precision its trainer
config resolved to and the world size into the case's folder; each test compares the ranks of its case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sts_lightning.embeddings.methods.registry import method
from tests.method_cases import ddp_cases, tiny_overrides
from tests.paths import ROOT

pytestmark = pytest.mark.slow  # one 2-rank DDP subprocess training every case: 8-15 s a case on 2 shared cores
DIST_ENV = ("MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "RANK", "GROUP_RANK")


def run_rank(case: str, model_dir: str, data_dir: str, out_dir: str) -> None:
    """One rank: compose the case's ``model=<method>`` with its defaults (tiny data / model and the case's overrides
    swapped in) and train 3 steps."""
    import torch.distributed as dist

    from sts_lightning.runs.train_run import train
    from tests.helpers import compose_train_config as _cfg

    out = Path(out_dir)
    model, extra = ddp_cases()[case]
    overrides = [f"model={model}", *tiny_overrides(model, method(model).data, model_dir, out), *extra,
                 "trainer.accelerator=cpu", "trainer.devices=2", "trainer.max_steps=3",
                 "callbacks.sts_evaluation.tasks=[stsb-dev,sick-trial]"]
    cfg = _cfg(out / "run", Path(model_dir), Path(data_dir), overrides)
    metrics = train(cfg)
    rank = dist.get_rank() if dist.is_initialized() else 0
    record = {"metrics": metrics, "precision": str(cfg.trainer.precision),
              "world_size": dist.get_world_size() if dist.is_initialized() else 1}
    (out / f"rank{rank}.json").write_text(json.dumps(record))


def run_cases(model_dir: str, data_dir: str, root: str, *cases: str) -> None:
    """Every case in turn, each in ``<root>/<case>``; a case that raises ends the run (its traceback names it)."""
    for case in cases:
        print(f"--- case {case}", file=sys.stderr, flush=True)
        (Path(root) / case).mkdir(exist_ok=True)
        run_rank(case, model_dir, data_dir, str(Path(root) / case))


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory, tiny_model_dir, train_data_dir) -> tuple[Path, subprocess.CompletedProcess]:
    """The one 2-rank run of every case: (its root folder, the finished process)."""
    root = tmp_path_factory.mktemp("ddp")
    env = {k: v for k, v in os.environ.items() if k not in DIST_ENV}  # fresh port, no inherited rank
    env.update(PYTHONPATH=str(ROOT), WANDB_MODE="disabled", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, __file__, str(tiny_model_dir), str(train_data_dir), str(root),
                           *ddp_cases()], env=env, cwd=ROOT, capture_output=True, text=True, timeout=420 * len(ddp_cases()))
    return root, done


@pytest.mark.parametrize("case", list(ddp_cases()))
def test_two_cpu_ranks_train_fp32_and_log_identical_metrics(case, ddp_runs):
    root, done = ddp_runs
    tmp_path = root / case
    assert done.returncode == 0 and (tmp_path / "rank1.json").is_file(), done.stderr[-4000:]
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank0["world_size"] == rank1["world_size"] == 2
    assert rank0["precision"] == rank1["precision"] == "32-true"
    val0 = {k: v for k, v in rank0["metrics"].items() if k.startswith("val/")}
    val1 = {k: v for k, v in rank1["metrics"].items() if k.startswith("val/")}
    assert "val/stsb-dev_spearman" in val0 and "val/sick-trial_spearman" in val0
    assert val0 == val1  # computed once on rank 0, broadcast: bit-identical, never averaged
    assert (tmp_path / "run" / "export").is_dir() and (tmp_path / "run" / "sts_before_after.md").is_file()
    if case == "mlm":  # accuracies are torchmetrics states summed over both ranks: one value, on every rank
        assert {"val/mlm_loss", "val/mlm_accuracy"} <= set(val0)
        train0, train1 = rank0["metrics"], rank1["metrics"]
        assert train0["train/mlm_accuracy"] == train1["train/mlm_accuracy"]  # synced at every step
        assert train0["train/mlm_loss"] != train1["train/mlm_loss"]  # each rank its own sentences and masks
    if case == "whitening":  # rank 0 exported the sums of BOTH ranks' batches: 3 steps x global batch 8
        config = json.loads((tmp_path / "run" / "export" / "whitening_config.json").read_text())
        assert config["fitted_vectors"] == 24


if __name__ == "__main__":
    run_cases(*sys.argv[1:])
