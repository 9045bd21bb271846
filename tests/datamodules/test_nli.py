"""NLIDataModule (datamodules.nli): batches of strings and labels, and a loader that resumes mid-epoch and
reshuffles each epoch.
"""

from __future__ import annotations

import torch

from sts_lightning.datamodules.nli import NLIDataModule, collate_nli
from tests.helpers import SENTEVAL_PAIRS, assert_resumes_mid_epoch, write_senteval


def test_nli_batch_is_strings_and_labels(tmp_path):
    write_senteval(tmp_path, "dev", SENTEVAL_PAIRS * 3)
    dm = NLIDataModule(str(tmp_path), "snli:dev", batch_size=4, seed=1)
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) == {"sentences1", "sentences2", "labels"}
    assert len(batch["sentences1"]) == len(batch["sentences2"]) == 4 and isinstance(batch["sentences1"][0], str)
    assert batch["labels"].dtype == torch.long and batch["labels"].shape == (4,)
    assert collate_nli([("a", "b", 2)])["labels"].tolist() == [2]


def test_nli_loader_resumes_mid_epoch_and_reshuffles_per_epoch(tmp_path):
    """The restored position (epoch, batches done) makes the next iterator continue that epoch's
    permutation; each epoch has its own permutation, a function of (seed, epoch) only."""
    write_senteval(tmp_path, "dev", [(f"premise {i} .", f"hypothesis {i} .", "neutral") for i in range(20)])

    def module():
        dm = NLIDataModule(str(tmp_path), "snli:dev", batch_size=2, seed=7)
        dm.setup("fit")
        return dm

    dm, epoch0 = assert_resumes_mid_epoch(module)
    assert sorted(epoch0) != epoch0
    assert dm.state_dict() == {}  # no trainer attached: nothing to save
