"""``embeddings.io.npy_cache``: the one ``.npy`` + JSON-sidecar cache (source vectors, BERT-flow features,
SED targets; token states use its sidecar pieces)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from sts_lightning.embeddings.io.npy_cache import (
    inspect_npy_cache,
    key_digest,
    load_npy_cache,
    npy_cache_problem,
    npy_cache_writer,
    read_sidecar,
    save_npy_cache,
    sidecar_of,
)

KEY = {"version": 1, "model": "m", "files": ["a.txt"]}


def test_save_then_load_round_trip(tmp_path):
    path = tmp_path / "c" / f"x.{key_digest(KEY)}.npy"
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    save_npy_cache(path, array, {"key": KEY, "source": "x"})
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, path.with_suffix(".json").name])
    info = json.loads(sidecar_of(path).read_text())
    assert info == {"key": KEY, "source": "x", "shape": [3, 4]}
    np.testing.assert_array_equal(load_npy_cache(path, {"key": KEY}, "test"), array)
    assert isinstance(load_npy_cache(path, {"key": KEY}, "test", mmap_mode="r"), np.memmap)


def test_key_digest_is_stable_and_order_free():
    assert key_digest({"a": 1, "b": [2]}) == key_digest({"b": [2], "a": 1}) != key_digest({"a": 2, "b": [2]})
    assert len(key_digest(KEY)) == 20


@pytest.mark.parametrize("damage, reason", [
    ("no array", "missing"), ("no sidecar", "missing"), ("other key", "its key differs"),
    ("truncated", "unreadable"), ("shape", "does not match its sidecar"), ("dtype", "does not match"),
    ("bad sidecar", "unreadable")])
def test_every_bad_cache_is_reported_and_rebuilt(tmp_path, caplog, damage, reason):
    path = tmp_path / "x.npy"
    save_npy_cache(path, np.ones((4, 2), np.float32), {"key": KEY})
    meta = sidecar_of(path)
    if damage == "no array":
        path.unlink()
    elif damage == "no sidecar":
        meta.unlink()
    elif damage == "other key":
        meta.write_text(json.dumps({"key": {**KEY, "model": "other"}, "shape": [4, 2]}))
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-8])
    elif damage == "shape":
        meta.write_text(json.dumps({"key": KEY, "shape": [5, 2]}))
    elif damage == "dtype":
        np.save(path, np.ones((4, 2), np.float64))
    else:
        meta.write_text("{")
    assert reason in npy_cache_problem(path, {"key": KEY})
    with caplog.at_level(logging.WARNING):
        assert load_npy_cache(path, {"key": KEY}, "test") is None
    assert ("not usable" in caplog.text) == (reason != "missing")


def test_expect_checks_every_named_field(tmp_path):
    path = tmp_path / "t.npy"
    save_npy_cache(path, np.zeros((2, 2), np.float32), {"key": KEY, "count": 2, "teachers": ["a"]})
    info, problem = inspect_npy_cache(path, {"key": KEY, "count": 2})
    assert problem == "" and info["teachers"] == ["a"]
    assert "count differs" in inspect_npy_cache(path, {"key": KEY, "count": 3})[1]
    assert inspect_npy_cache(path, {})[1] == ""  # no key asked: only the array / sidecar agreement
    assert read_sidecar(tmp_path / "none.json", {})[1] == "missing"


def test_chunked_writer_and_a_failed_write_leave_nothing_half_written(tmp_path):
    path = tmp_path / "f.npy"
    with pytest.raises(RuntimeError), npy_cache_writer(path, {"key": KEY}) as tmp:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(6, 3))
        out[:3] = 1.0
        raise RuntimeError("killed mid-encode")
    assert list(tmp_path.iterdir()) == []
    with npy_cache_writer(path, {"key": KEY}) as tmp:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(6, 3))
        out[:] = 2.0
        out.flush()
        del out
        assert not path.exists() and not sidecar_of(path).exists()
    assert json.loads(sidecar_of(path).read_text())["shape"] == [6, 3]
    assert float(load_npy_cache(path, {"key": KEY}, "test").sum()) == 36.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json", "f.npy"]
