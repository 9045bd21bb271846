"""Several nodes (issue 30, item 4): ``torchrun --nnodes 2 --nproc-per-node 1`` started twice on one host, as two
"nodes" of one gloo run, each running ``train.py`` with ``trainer.num_nodes=2`` for a few steps.

What must hold: both nodes end with the same validation metrics and the same weights (each records them through
``RecordRank``, added with ``+callbacks.record``), exactly one export exists (global rank 0's, in the shared
``hydra.run.dir``), and only rank 0 wrote the run's ``.hydra/`` and ``train.log`` there (rank 1 logs to
``train.rank1.log``: ``runs/run_id.py``). The commands are the ones docs/reliability.md "Several nodes" shows.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from lightning.pytorch import Callback

from sts_lightning.embeddings.io.export_manifest import MANIFEST_FILE, verify_export
from tests.paths import ROOT
from tests.runs.two_nodes import node_command

pytestmark = pytest.mark.slow  # two train.py processes over gloo: ~40 s on 2 shared cores
DIST_ENV = ("MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "RANK", "GROUP_RANK")


class RecordRank(Callback):
    """Writes ``<out>/rank<global rank>.json``: the final metrics, the world, and a SHA-256 of every weight."""

    def __init__(self, out: str):
        self.out = Path(out)

    def on_fit_end(self, trainer, pl_module):
        digest = hashlib.sha256()
        for name, tensor in sorted(pl_module.state_dict().items()):
            digest.update(name.encode() + tensor.detach().cpu().contiguous().numpy().tobytes())
        record = {"metrics": {k: float(v) for k, v in trainer.callback_metrics.items()}, "weights": digest.hexdigest(),
                  "world_size": trainer.world_size, "num_nodes": trainer.num_nodes, "node_rank": trainer.node_rank,
                  "step": trainer.global_step}
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / f"rank{trainer.global_rank}.json").write_text(json.dumps(record, sort_keys=True))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_nodes_by_torchrun_train_alike_and_export_once(tmp_path, tiny_model_dir, train_data_dir):
    run_dir, records = tmp_path / "run", tmp_path / "records"
    tiny = [f"paths.data_dir={train_data_dir}", f"model.model_name_or_path={tiny_model_dir}", "model.max_length=32",
            "model.eval_batch_size=8", "data.sources=[snli:dev,sick:trial]", "data.batch_size=4",
            "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
            "callbacks.sts_evaluation.batch_size=8", "callbacks.sts_evaluation.tasks=[stsb-dev,sick-trial]",
            f"+callbacks.record._target_={__name__}.RecordRank", f"+callbacks.record.out={records}"]
    env = {k: v for k, v in os.environ.items() if k not in DIST_ENV}
    env.update(PYTHONPATH=str(ROOT), WANDB_MODE="disabled", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    port = _free_port()
    logs = [tmp_path / f"node{node}.log" for node in (0, 1)]
    procs = []
    for node, log in enumerate(logs):
        with log.open("w") as sink:
            procs.append(subprocess.Popen(node_command(node, port, run_dir, tiny), cwd=ROOT, env=env, stdout=sink,
                                          stderr=subprocess.STDOUT))
    try:
        codes = [proc.wait(timeout=540) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert codes == [0, 0], "\n".join(f"--- {log}\n{log.read_text()[-3000:]}" for log in logs)
    rank0, rank1 = (json.loads((records / f"rank{r}.json").read_text()) for r in (0, 1))
    assert (rank0["node_rank"], rank1["node_rank"]) == (0, 1)
    assert rank0["world_size"] == rank1["world_size"] == 2 and rank0["num_nodes"] == 2
    assert rank0["step"] == rank1["step"] == 3
    val0 = {k: v for k, v in rank0["metrics"].items() if k.startswith("val/")}
    assert {"val/stsb-dev_spearman", "val/sick-trial_spearman"} <= set(val0)
    assert val0 == {k: v for k, v in rank1["metrics"].items() if k.startswith("val/")}
    assert rank0["weights"] == rank1["weights"]  # DDP over two nodes: one model
    assert [p.parent for p in tmp_path.rglob(MANIFEST_FILE)] == [run_dir / "export"]  # one export, rank 0's
    assert verify_export(run_dir / "export") is True
    assert [p.parent for p in tmp_path.rglob(".hydra")] == [run_dir]  # rank 0's config record only
    assert (run_dir / "train.log").is_file() and (run_dir / "train.rank1.log").is_file()
    assert (run_dir / "sts_before_after.md").is_file() and (run_dir / "checkpoints" / "last.ckpt").is_file()
