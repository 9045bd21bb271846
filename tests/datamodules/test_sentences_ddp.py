"""SentenceDataModule under a real 2-rank CPU DDP Trainer: every usable sentence once per epoch, equal batches.

``tests/datamodules/test_sentence_stream.py`` checks the rank x worker arithmetic without a Trainer; this checks what the
ranks actually receive when Lightning drives the loaders (epoch hand-over, dataloader workers, DDP). As in
``tests/callbacks/test_sts_evaluation.py`` the fit runs this file as a script in a subprocess with ``strategy="ddp"``
(Lightning's launcher re-runs ``sys.argv`` for rank 1, so not inside pytest; ``ddp_spawn`` is not what
``train.py`` uses); the timeout turns a DDP hang, the failure unequal batch counts cause, into a failure.
Each rank writes the batches it trained on to ``<out>/rank<r>_epoch<e>.jsonl``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch

from sts_lightning.datamodules.sentences import SentenceDataModule
from tests.paths import ROOT

# As in tests/callbacks/test_sts_evaluation.py (not imported: the DDP script would then load transformers too).
pytestmark = pytest.mark.slow  # a real 2-rank DDP Trainer per test: 24-34 s each on 2 shared cores
DIST_ENV = {"MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "GLOBAL_RANK", "WORLD_SIZE", "RANK"}
GLOBAL_BATCH = 4  # 2 a rank
EPOCHS = 2
# 53 usable lines: a remainder for both 2 (ranks) and 4 (ranks x workers) shards of 2-sentence batches.
SENTENCES = [f"sentence number {i} here" for i in range(53)]


class RecordingModule(L.LightningModule):
    """One weight and a trivial loss (so DDP has a gradient to all-reduce); writes down every batch."""

    def __init__(self, out_dir: str):
        super().__init__()
        self.out_dir = Path(out_dir)
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def on_train_start(self) -> None:
        dataset = self.trainer.datamodule.dataset
        info = {"dropped": dataset.dropped(), "batches": self.trainer.num_training_batches}
        (self.out_dir / f"rank{self.global_rank}.json").write_text(json.dumps(info))

    def training_step(self, batch, batch_idx):
        path = self.out_dir / f"rank{self.global_rank}_epoch{self.current_epoch}.jsonl"
        with path.open("a") as f:
            f.write(json.dumps(batch["sentences"]) + "\n")
        return ((self.weight - len(batch["sentences"])) ** 2).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def run_ddp_fit(sentence_file: str, out_dir: str, num_workers: str) -> None:
    """One rank of the 2-process CPU DDP fit; Lightning's launcher re-runs this file for rank 1."""
    torch.set_num_threads(1)
    path = Path(sentence_file)
    datamodule = SentenceDataModule(data_dir=str(path.parent), files=[path.name], batch_size=GLOBAL_BATCH, num_workers=int(num_workers),
                                    seed=7, cache_dir=str(Path(out_dir) / "cache"))
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=EPOCHS, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, default_root_dir=out_dir)
    trainer.fit(RecordingModule(out_dir), datamodule=datamodule)


def _batches(out: Path, rank: int, epoch: int) -> list[list[str]]:
    return [json.loads(line) for line in (out / f"rank{rank}_epoch{epoch}.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_ddp_ranks_share_each_epoch_exactly(tmp_path, num_workers):
    lines = list(SENTENCES)
    for at in (0, 9, 30):  # empty and whitespace-only lines: skipped, never a sentence
        lines.insert(at, "" if at else "  \t ")
    sentence_file = tmp_path / "sentences.txt"
    sentence_file.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in DIST_ENV}  # fresh port, no inherited rank
    env.update(PYTHONPATH=str(ROOT), WANDB_MODE="disabled", TOKENIZERS_PARALLELISM="false")
    done = subprocess.run([sys.executable, __file__, str(sentence_file), str(out), str(num_workers)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]

    info = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    dropped = info[0]["dropped"]
    assert info[0] == info[1] and dropped == (1 if num_workers == 0 else 5)  # 53 % 4, 53 % 8
    orders = []
    for epoch in range(EPOCHS):
        per_rank = [_batches(out, r, epoch) for r in (0, 1)]
        assert len(per_rank[0]) == len(per_rank[1]) == info[0]["batches"]  # equal, or DDP would hang
        assert all(len(b) == GLOBAL_BATCH // 2 for batches in per_rank for b in batches)
        seen = [s for batches in per_rank for b in batches for s in b]
        assert len(seen) == len(set(seen)) == len(SENTENCES) - dropped  # nothing twice, only the remainder lost
        assert set(seen) <= set(SENTENCES)
        orders.append([[s for b in batches for s in b] for batches in per_rank])
    assert orders[0][0] != orders[1][0] and orders[0][1] != orders[1][1]  # a new permutation each epoch
    assert set(orders[0][0]) != set(orders[1][0])  # ... over all ranks, not only within each rank's share


if __name__ == "__main__":
    run_ddp_fit(*sys.argv[1:4])
