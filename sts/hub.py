"""STS sets from the Hugging Face datasets hub, for users with internet.

Kept separate from the local readers: tests and defaults never touch the network. Each entry
maps our task name to (dataset id, split, score multiplier to the original 0-5 / 1-5 scale).
"""

from __future__ import annotations

import numpy as np

from sts_lightning.embeddings.errors import DataError, unknown_choice
from sts_lightning.sts.readers import STSPairs

HUB_TASKS: dict[str, tuple[str, str, float]] = {
    "stsb-train": ("sentence-transformers/stsb", "train", 5.0),
    "stsb-dev": ("sentence-transformers/stsb", "validation", 5.0),
    "stsb-test": ("sentence-transformers/stsb", "test", 5.0),
    "sick-test": ("mteb/sickr-sts", "test", 1.0),
    "sts12": ("mteb/sts12-sts", "test", 1.0),
    "sts13": ("mteb/sts13-sts", "test", 1.0),
    "sts14": ("mteb/sts14-sts", "test", 1.0),
    "sts15": ("mteb/sts15-sts", "test", 1.0),
    "sts16": ("mteb/sts16-sts", "test", 1.0),
}


def load_hub_task(name: str) -> dict[str, STSPairs]:
    """Download one task; a single subset named after the split (the hub sets are pre-pooled)."""
    if name not in HUB_TASKS:
        raise unknown_choice("hub STS task", name, HUB_TASKS)
    dataset_id, split, scale = HUB_TASKS[name]
    try:
        from datasets import load_dataset

        ds = load_dataset(dataset_id, split=split)
    except Exception as err:  # network, missing dataset, auth: all mean the same to the user
        raise DataError(f"could not load {dataset_id} ({split}) from the Hugging Face hub: {err}. "
                        f"Offline? Use a local data directory instead (data_source=local).") from err
    return {split: STSPairs(list(ds["sentence1"]), list(ds["sentence2"]),
                            np.asarray(ds["score"], dtype=np.float64) * scale, f"hub:{dataset_id}/{split}")}
