"""Hub loaders (online users): mapping, score scale and the offline error, with the download faked."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from sts_lightning.embeddings.errors import DataError
from sts_lightning.sts.tasks import load_task


def _fake_datasets(monkeypatch, fn):
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=fn))


def test_hub_stsb_rescaled_to_original_range(monkeypatch):
    calls = []

    def load_dataset(name, split):
        calls.append((name, split))
        return {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [0.2, 1.0]}

    _fake_datasets(monkeypatch, load_dataset)
    task = load_task("stsb-dev", source="hub")
    assert calls == [("sentence-transformers/stsb", "validation")]
    np.testing.assert_allclose(task.subsets["validation"].scores, [1.0, 5.0])


def test_hub_unreachable_is_a_clear_error(monkeypatch):
    def load_dataset(name, split):
        raise ConnectionError("offline")

    _fake_datasets(monkeypatch, load_dataset)
    with pytest.raises(DataError, match="could not load mteb/sts12-sts.*local data directory"):
        load_task("sts12", source="hub")
