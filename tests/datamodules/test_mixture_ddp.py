"""A mixture under real DDP (2 CPU ranks over gloo): each rank trains on its slice of the same one-source batches.

Why a subprocess running this file: Lightning's DDP launcher re-runs ``sys.argv`` for rank 1, which must be a
script, not pytest (as ``tests/runs/test_ddp_train.py``). Each rank records the anchors of every batch it got
(after Lightning rebuilt the loader with its ``DistributedSampler``); the test compares them with the global batches
of a single process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.slow  # a 2-rank DDP subprocess: 15-55 s on 2 shared cores
DIST_ENV = ("MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "RANK", "GROUP_RANK")
OPTIONS = {"batch_size": 8, "seed": 3, "format": "triplets", "mixture": "proportional", "no_duplicates": True}


def _files(folder: Path) -> list[str]:
    """Two triplet files whose anchors repeat (the no-duplicates rule has work)."""
    paths = []
    for name, rows, vocab in (("a", 37, 9), ("b", 21, 7)):
        path = folder / f"{name}.tsv"
        lines = [f"{name}{(i * 5) % vocab}\t{name} positive {i}\t{name} negative {i}" for i in range(rows)]
        path.write_text("anchor\tpositive\tnegative\n" + "\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


def run_rank(folder: str) -> None:
    from lightning.pytorch import Trainer

    from sts_lightning.datamodules.nli import NLIDataModule
    from tests.helpers import anchor_recorder

    out = Path(folder)
    dm = NLIDataModule(str(out), _files(out), **OPTIONS)
    module = anchor_recorder()
    trainer = Trainer(max_epochs=2, accelerator="cpu", devices=2, strategy="ddp", logger=False,
                      enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                      num_sanity_val_steps=0, default_root_dir=out)
    trainer.fit(module, datamodule=dm)
    (out / f"rank{trainer.global_rank}.json").write_text(json.dumps(module.seen))


def test_two_ranks_train_on_slices_of_the_same_one_source_batches(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in DIST_ENV}  # fresh port, no inherited rank
    env.update(PYTHONPATH=str(ROOT), WANDB_MODE="disabled", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, __file__, str(tmp_path)], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]

    from sts_lightning.datamodules.nli import NLIDataModule

    single = NLIDataModule(str(tmp_path), _files(tmp_path), **OPTIONS)
    single.setup("fit")
    loader = single.train_dataloader()
    want = []
    for epoch in (0, 1):
        single.load_state_dict({"epoch": epoch, "batches_done": 0})
        want += [b["anchors"] for b in loader]
    assert len(ranks[0]) == len(ranks[1]) == len(want)
    for whole, r0, r1 in zip(want, *ranks, strict=True):
        assert len(r0) == len(r1) and {a[0] for a in r0 + r1} == {whole[0][0]}  # one source
        if len(whole) == OPTIONS["batch_size"]:
            assert r0 + r1 == whole
        else:  # a short last batch: padded with its own rows
            assert set(r0 + r1) == set(whole)


if __name__ == "__main__":
    run_rank(sys.argv[1])
