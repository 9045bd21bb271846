"""``model=ct``, ``model=sed``, ``model=cosent``, ``model=simcse`` (in-batch negatives gathered across ranks),
``model=whitening`` (moments all-reduced) and CT with the cached in-batch loss through ``train()`` on 2 CPU ranks
(DDP over gloo): fp32, identical STS metrics.

Why a subprocess running this file: Lightning's DDP launcher re-runs ``sys.argv`` for rank 1, which must
be a script, not pytest (see tests/callbacks/test_sts_evaluation.py). Each rank writes what ``train()`` returned, the
precision its trainer config resolved to and the world size, then the test compares the ranks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.slow  # a 2-rank DDP subprocess per test: 14-26 s each on 2 shared cores
DIST_ENV = ("MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "RANK", "GROUP_RANK")
TINY = {"ct": ["data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8", "model.pairs=8", "model.positives=2"],
        "sed": ["data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8"],
        # the CoSENT ranking gathers the similarities of both ranks (a collective every step)
        "cosent": ["data.sources=[stsb:train,sick:trial]", "data.batch_size=4"],
        # the cached in-batch loss (GradCache surrogate) through Lightning's DDP wrapper and optimizer loop
        "ct_cached": ["data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8", "model.objective=in_batch",
                      "model.dropout=true", "model.mini_batch_size=2", "model.gradient_checkpointing=true"],
        "simcse": ["data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8"],
        "whitening": ["data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8"]}


def run_rank(model: str, model_dir: str, data_dir: str, out_dir: str) -> None:
    """One rank: compose ``model=<model>`` with its defaults (tiny data / model swapped in) and train 3 steps."""
    import torch.distributed as dist

    from sts_lightning.runs.train_run import train
    from tests.helpers import compose_train_config as _cfg

    out = Path(out_dir)
    overrides = [f"model={model.removesuffix('_cached')}", *TINY[model], "trainer.accelerator=cpu", "trainer.devices=2",
                 "trainer.max_steps=3", "callbacks.sts_evaluation.tasks=[stsb-dev,sick-trial]"]
    if model != "cosent":  # the datamodules with a cache
        overrides.append(f"data.cache_dir={out / 'cache'}")
    if model == "sed":
        overrides.append(f"data.teachers=[{model_dir}]")
    cfg = _cfg(out / "run", Path(model_dir), Path(data_dir), overrides)
    metrics = train(cfg)
    rank = dist.get_rank() if dist.is_initialized() else 0
    record = {"metrics": metrics, "precision": str(cfg.trainer.precision),
              "world_size": dist.get_world_size() if dist.is_initialized() else 1}
    (out / f"rank{rank}.json").write_text(json.dumps(record))


@pytest.mark.parametrize("model", ["ct", "sed", "cosent", "ct_cached", "simcse", "whitening"])
def test_two_cpu_ranks_train_fp32_and_log_identical_metrics(model, tmp_path, tiny_model_dir, train_data_dir):  # noqa: F811
    env = {k: v for k, v in os.environ.items() if k not in DIST_ENV}  # fresh port, no inherited rank
    env.update(PYTHONPATH=str(ROOT), WANDB_MODE="disabled", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, __file__, model, str(tiny_model_dir), str(train_data_dir), str(tmp_path)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=420)
    assert done.returncode == 0, done.stderr[-4000:]
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank0["world_size"] == rank1["world_size"] == 2
    assert rank0["precision"] == rank1["precision"] == "32-true"
    val0 = {k: v for k, v in rank0["metrics"].items() if k.startswith("val/")}
    val1 = {k: v for k, v in rank1["metrics"].items() if k.startswith("val/")}
    assert "val/stsb-dev_spearman" in val0 and "val/sick-trial_spearman" in val0
    assert val0 == val1  # computed once on rank 0, broadcast: bit-identical, never averaged
    assert (tmp_path / "run" / "export").is_dir() and (tmp_path / "run" / "sts_before_after.md").is_file()
    if model == "whitening":  # rank 0 exported the sums of BOTH ranks' batches: 3 steps x global batch 8
        config = json.loads((tmp_path / "run" / "export" / "whitening_config.json").read_text())
        assert config["fitted_vectors"] == 24


if __name__ == "__main__":
    run_rank(*sys.argv[1:5])
