"""What "a resumed run equals the uninterrupted one" means, shared by the fault-injection and preemption tests.

The final ``last.ckpt`` (step, every weight), the export (every file's SHA-256 in its manifest), the model card as
text with its wall-time line masked (a resumed process ran for less time: ``embeddings.io.model_card.WALL_TIME``),
and the final STS score; and no temporary file left anywhere in the run directory.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from sts_lightning.embeddings.io.atomic import ORPHAN
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint
from sts_lightning.embeddings.io.export_manifest import MANIFEST_FILE
from sts_lightning.embeddings.io.model_card import CARD_FILE, WALL_TIME

# 14 NLI pairs, batch 4 -> 4 steps an epoch, 8 in all; last.ckpt after every step; the export at the end.
EIGHT_STEPS = ["trainer.max_epochs=2", "trainer.deterministic=true", "export=true",
               "callbacks.last_checkpoint.every_n_train_steps=1"]


def leftovers(out: Path) -> list[str]:
    """Temporary copies anywhere under ``out`` (ours, and any ``*.tmp`` another writer might leave)."""
    return [str(p.relative_to(out)) for p in out.rglob("*") if ORPHAN.match(p.name) or re.search(r"\.tmp\b", p.name)]


def final_state(out: Path) -> dict:
    """What is compared of a finished run in ``out``. The STS score: ``driver_metrics.json`` (the fault driver's
    record of ``train()``'s metrics) where there is one, else the run's ``sts_before_after.md`` (a ``train.py`` run)."""
    ckpt = load_checkpoint(out / "checkpoints" / "last.ckpt")
    manifest = json.loads((out / "export" / MANIFEST_FILE).read_text())["files"]
    assert manifest.pop(CARD_FILE, None) is not None, "the export's manifest does not list its model card"
    card = [f"{WALL_TIME} <masked>" if line.startswith(WALL_TIME) else line
            for line in (out / "export" / CARD_FILE).read_text().splitlines()]
    assert card.count(f"{WALL_TIME} <masked>") == 1
    recorded = out / "driver_metrics.json"
    sts = (json.loads(recorded.read_text())["val/stsb-dev_spearman"] if recorded.is_file()
           else (out / "sts_before_after.md").read_text())
    return {"step": ckpt["global_step"], "state": ckpt["state_dict"], "export": manifest, "card": card, "sts": sts}


def assert_identical(a: dict, b: dict, steps: int = 8) -> None:
    """``b`` (the resumed run) equals ``a`` (the uninterrupted one), both ``steps`` optimizer steps long."""
    assert b["step"] == a["step"] == steps
    assert a["state"].keys() == b["state"].keys()
    differ = [k for k in a["state"] if not torch.equal(a["state"][k], b["state"][k])]
    assert not differ, f"weights differ after the resume: {differ[:5]}"
    assert b["export"] == a["export"], "the resumed run's export differs from the uninterrupted run's"
    assert b["card"] == a["card"], "the resumed run's model card differs (beyond its wall time)"
    assert b["sts"] == a["sts"]
