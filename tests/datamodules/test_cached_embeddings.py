"""CachedEmbeddingDataModule (datamodules.cached_embeddings): its loader resumes mid-epoch.
"""

from __future__ import annotations

import numpy as np

from sts_lightning.datamodules.cached_embeddings import CachedEmbeddingDataModule
from sts_lightning.datamodules.loader import ResumableDataModule
from sts_lightning.embeddings.io.npy_cache import save_npy_cache


def test_cached_embedding_loader_resumes_mid_epoch(tmp_path):
    """BERT-flow's feature DataModule: a loader restored after ``k`` batches of an epoch yields exactly the
    remaining batches of the uninterrupted one; each epoch has its own (seed, epoch) permutation. The feature
    cache is written with ``embeddings.io.npy_cache`` under the module's own key, so nothing is encoded."""
    (tmp_path / "data" / "wiki").mkdir(parents=True)
    (tmp_path / "data" / "wiki" / "s.txt").write_text("".join(f"sentence number {i}\n" for i in range(22)))

    def module() -> CachedEmbeddingDataModule:
        return CachedEmbeddingDataModule(str(tmp_path / "data"), ["wiki/s.txt"], model_name_or_path="no-such-model",
                                         pooling="mean", batch_size=4, seed=11, cache_dir=str(tmp_path / "cache"))

    first = module()
    assert isinstance(first, ResumableDataModule)
    key = first.cache_key()
    save_npy_cache(first.cache_path(key), np.arange(22 * 3, dtype=np.float32).reshape(22, 3), {"key": key})

    def batches(dm) -> list[tuple[float, ...]]:
        return [tuple(b[0][:, 0].tolist()) for b in dm.train_dataloader()]

    epoch0 = batches(first)
    first.load_state_dict({"epoch": 1, "batches_done": 0})
    epoch1 = batches(first)
    assert len(epoch0) == 6 and epoch0 != epoch1 and sorted(sum(epoch0, ())) == sorted(sum(epoch1, ()))
    for k in (1, 3, 5):
        resumed = module()
        resumed.load_state_dict({"epoch": 1, "batches_done": k})
        assert batches(resumed) == epoch1[k:], k
    assert batches(module()) == epoch0  # (seed, epoch) alone fixes the order
