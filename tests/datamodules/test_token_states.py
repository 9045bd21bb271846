"""Token-state cache and DataModule (datamodules.token_states): encoded once, equal to a direct forward
pass, padding excluded, bad caches rebuilt, layer and source handling."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from sts_lightning.datamodules.token_state_cache import _files
from sts_lightning.datamodules.token_states import TokenStateDataModule
from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import token_batch
from tests.tolerance import TINY_BERT


def dm(tiny_model_dir, data_dir, tmp_path, **kwargs) -> TokenStateDataModule:
    args = {"files": ["nli:snli:dev", "wiki/wiki_sentences_100k.txt"], "max_length": 16, "batch_size": 4,
            "cache_dir": str(tmp_path / "cache"), "shuffle": False, "encode_device": "cpu", **kwargs}
    return TokenStateDataModule(str(data_dir), model_name_or_path=str(tiny_model_dir), **args)


def test_states_equal_a_direct_forward_pass_and_batches_pad(tiny_model_dir, train_data_dir, tmp_path,  # noqa: F811
                                                            tiny_encoder):
    d = dm(tiny_model_dir, train_data_dir, tmp_path)
    d.prepare_data()
    d.setup("fit")
    sentences = d.sentences()
    assert len(sentences) == len(set(sentences)) and len(d.dataset) == len(sentences)
    for i in (0, 5, len(sentences) - 1):
        batch = token_batch(tiny_encoder, [sentences[i]])  # max_length 32 > 16: no truncation here
        expected = batch.hidden_states[-1][0]
        torch.testing.assert_close(d.dataset[i], expected, **TINY_BERT)
    first = next(iter(d.train_dataloader()))
    assert first["features"].shape[:2] == first["mask"].shape and first["mask"].dtype == torch.bool
    lengths = first["mask"].sum(1)
    assert int(lengths.max()) == first["mask"].shape[1] and (first["features"][~first["mask"]] == 0).all()
    assert d.cache_bytes() > d.num_tokens * d.feature_dim * 4


def test_cache_is_reused_and_bad_caches_are_rebuilt(tiny_model_dir, train_data_dir, tmp_path, monkeypatch,  # noqa: F811
                                                    caplog):
    first = dm(tiny_model_dir, train_data_dir, tmp_path)
    first.prepare_data()
    first.setup("fit")
    reference = first.dataset[3].clone()

    import sts_lightning.embeddings.encoders.load as load_module

    def refuse(*args, **kwargs):
        raise AssertionError("re-encoded although a valid cache exists")

    monkeypatch.setattr(load_module, "load_encoder", refuse)
    dm(tiny_model_dir, train_data_dir, tmp_path).prepare_data()  # valid cache: no encoder needed
    monkeypatch.undo()

    states_file, _, meta_file = _files(first._stem)
    data = states_file.read_bytes()
    states_file.write_bytes(data[: len(data) // 2])  # truncated
    again = dm(tiny_model_dir, train_data_dir, tmp_path)
    with caplog.at_level(logging.WARNING):
        again.prepare_data()
    assert "not usable" in caplog.text and "unreadable" in caplog.text
    again.setup("fit")
    torch.testing.assert_close(again.dataset[3], reference)

    meta = meta_file.read_text().replace(str(tiny_model_dir), "another-model")
    meta_file.write_text(meta)  # a sidecar describing another model
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        dm(tiny_model_dir, train_data_dir, tmp_path).prepare_data()
    assert "key" in caplog.text


def test_layer_selection_and_range(tiny_model_dir, train_data_dir, tmp_path):  # noqa: F811
    last = dm(tiny_model_dir, train_data_dir, tmp_path, files=["nli:snli:dev"])
    first = dm(tiny_model_dir, train_data_dir, tmp_path, files=["nli:snli:dev"], layer=0)
    for d in (last, first):
        d.prepare_data()
        d.setup("fit")
    assert not torch.allclose(last.dataset[0], first.dataset[0])
    with pytest.raises(ConfigError, match="layer 9 out of range"):
        dm(tiny_model_dir, train_data_dir, tmp_path, files=["nli:snli:dev"], layer=9).prepare_data()


def test_float16_storage_and_max_sentences(tiny_model_dir, train_data_dir, tmp_path):  # noqa: F811
    d = dm(tiny_model_dir, train_data_dir, tmp_path, dtype="float16", max_sentences=5)
    d.prepare_data()
    d.setup("fit")
    assert len(d.dataset) == 5 and d.dataset.states.dtype == np.float16 and d.dataset[0].dtype == torch.float32
    with pytest.raises(ConfigError, match="dtype"):
        dm(tiny_model_dir, train_data_dir, tmp_path, dtype="int8")
