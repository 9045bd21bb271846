"""The two-node ``torchrun`` command line, shared by ``test_several_nodes.py`` (which runs it) and
``tests/test_docs.py`` (which checks the README shows it)."""

from __future__ import annotations

import sys
from pathlib import Path


def node_command(node_rank: int, port: int, run_dir: Path, tiny: list[str]) -> list[str]:
    """One node's command line (``torchrun`` is ``python -m torch.distributed.run``)."""
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
            "--node-rank", str(node_rank), "--master-addr", "127.0.0.1", "--master-port", str(port),
            "train.py", *tiny, "trainer.num_nodes=2", "trainer.devices=1", "trainer.accelerator=cpu",
            "trainer.strategy=ddp", "trainer.max_steps=3", f"hydra.run.dir={run_dir}"]
