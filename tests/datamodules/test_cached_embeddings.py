"""CachedEmbeddingDataModule (datamodules.cached_embeddings): its loader resumes mid-epoch; its cache build counts.
"""

from __future__ import annotations

import logging
import re

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


def test_a_cache_built_in_chunks_shows_one_counter_with_the_whole_total(tmp_path, tiny_model_dir, caplog, monkeypatch):
    """Issue 38: each 8,192-sentence chunk ran its own counter to 100% and restarted; now one counter for all."""
    from sts_lightning.embeddings import console

    monkeypatch.setattr(console, "LOG_EVERY_S", 0.0)  # a line at every update
    (tmp_path / "s.txt").write_text("".join(f"sentence number {i} of the corpus\n" for i in range(10)))
    dm = CachedEmbeddingDataModule(str(tmp_path), ["s.txt"], model_name_or_path=str(tiny_model_dir), pooling="mean",
                                   cache_dir=str(tmp_path / "cache"), chunk_size=4, encode_batch_size=2)
    with caplog.at_level(logging.INFO, logger="sts_lightning.embeddings.console"):
        dm.prepare_data()
    lines = [r.getMessage() for r in caplog.records if r.name == "sts_lightning.embeddings.console"]
    assert [line for line in lines if "to go" in line] == [lines[0]] and lines[0].endswith(": 10 sentences to go")
    counts = [tuple(int(x) for x in re.search(r": (\d+)/(\d+) sentences", line).groups()) for line in lines[1:]]
    assert len(counts) >= 5 and {total for _, total in counts} == {10}  # 3 chunks, 5 batches: one counter
    assert [done for done, _ in counts] == sorted(done for done, _ in counts) and counts[-1] == (10, 10)
    assert dm.pending_encodes() == []  # the cache is valid now: nothing before step 1


def test_pending_encodes_names_the_encoder_and_the_sentences(tmp_path, tiny_model_dir):
    (tmp_path / "s.txt").write_text("abcd efgh\nab cd\n")
    dm = CachedEmbeddingDataModule(str(tmp_path), ["s.txt"], model_name_or_path=str(tiny_model_dir), pooling="mean",
                                   cache_dir=str(tmp_path / "cache"))
    assert dm.pending_encodes() == [("caching features", str(tiny_model_dir), 2, 7.0)]
