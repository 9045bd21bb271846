"""TSDAE's noise and loss (embeddings.methods.tsdae.objective) against sentence-transformers' reference.

The noise: ``DenoisingAutoEncoderDataset.delete`` needs nltk, which is not installed here; it is run with a
stand-in nltk whose tokenizer splits on whitespace and whose detokenizer joins with one space (what ours does
instead), so with the same random state both must give the same string. The loss: ``DenoisingAutoEncoderLoss``
(tied decoder) on the same tiny model, the same (noisy, original) batch and the decoder's own weights copied
across, dropout off: same loss to 1e-5 and the same gradients, tied (the paper) and untied (the decoder a copy of
the checkpoint).
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

from sts_lightning.embeddings.methods.tsdae.objective import add_noise, decoder_loss, delete_words, noise_rng
from tests.helpers import GRADIENT_SENTENCES, WORDS, assert_same_gradients

SENTENCES = [" ".join(WORDS[i:i + 3 + i % 9]) for i in range(24)]


@pytest.fixture()
def whitespace_nltk(monkeypatch):
    """A stand-in ``nltk`` for sentence-transformers' ``delete``: whitespace words, joined by one space."""
    nltk = types.ModuleType("nltk")
    nltk.word_tokenize = str.split
    treebank = types.ModuleType("nltk.tokenize.treebank")
    treebank.TreebankWordDetokenizer = type("Detok", (), {"detokenize": lambda self, words: " ".join(words)})
    for name, module in {"nltk": nltk, "nltk.tokenize": types.ModuleType("nltk.tokenize"),
                         "nltk.tokenize.treebank": treebank}.items():
        monkeypatch.setitem(sys.modules, name, module)


@pytest.mark.parametrize("ratio", [0.6, 0.3, 0.95])
def test_noise_is_sentence_transformers_delete_with_whitespace_words(ratio, whitespace_nltk):
    from sentence_transformers.sentence_transformer.datasets import DenoisingAutoEncoderDataset

    texts = [*GRADIENT_SENTENCES, "one", "", "two words"]
    for seed in range(5):
        np.random.seed(seed)  # theirs draws from numpy's global RandomState
        theirs = [DenoisingAutoEncoderDataset.delete(t, del_ratio=ratio) for t in texts]
        ours = add_noise(texts, np.random.RandomState(seed), ratio)
        assert ours == theirs


def test_noise_statistics_deletion_share_one_word_kept_order_kept():
    rng = noise_rng(0, 0, 0)
    words = [f"w{i}" for i in range(20)]
    kept = total = 0
    for _ in range(500):
        noisy = delete_words(" ".join(words), rng, 0.6).split()
        assert noisy and noisy == sorted(noisy, key=words.index)  # never empty, order kept, no word twice
        assert len(set(noisy)) == len(noisy)
        kept, total = kept + len(noisy), total + len(words)
    assert abs(1 - kept / total - 0.6) < 0.01  # 10k Bernoulli draws: sd 0.005
    singles = [delete_words("only", rng, 0.6) for _ in range(50)]
    assert set(singles) == {"only"}  # a one-word sentence keeps its word
    assert delete_words("a b c", rng, 0.0) == "a b c" and delete_words("   ", rng, 0.6) == "   "


def test_noise_is_a_pure_function_of_seed_rank_and_step():
    def draw(seed, rank, step):
        return add_noise(SENTENCES, noise_rng(seed, rank, step))

    assert draw(0, 0, 7) == draw(0, 0, 7)  # a resumed run deletes the same words
    assert draw(0, 0, 7) != draw(0, 1, 7) != draw(1, 0, 7)  # ranks and seeds draw their own
    assert draw(0, 0, 7) != draw(0, 0, 8)


def _st_model(model_dir):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(str(model_dir), max_seq_length=32)
    return SentenceTransformer(modules=[transformer, Pooling(32, pooling_mode="cls")], device="cpu")


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_loss_and_gradients_equal_sentence_transformers(tie, tiny_model_dir, one_thread):
    from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss

    from sts_lightning.embeddings.encoders.hf import HFEncoder
    from sts_lightning.embeddings.methods.pooling import cls_pool
    from sts_lightning.embeddings.methods.tsdae.decoder import build_decoder

    torch.manual_seed(0)
    st = _st_model(tiny_model_dir)
    theirs = DenoisingAutoEncoderLoss(st, decoder_name_or_path=None if tie else str(tiny_model_dir),
                                      tie_encoder_decoder=tie)
    encoder = HFEncoder.from_pretrained(str(tiny_model_dir), max_length=32)
    decoder = build_decoder(str(tiny_model_dir), encoder.model, tie=tie)
    decoder.load_state_dict(theirs.decoder.state_dict())  # their random cross-attention / head; the body: equal
    st.eval(), theirs.decoder.eval(), encoder.model.eval(), decoder.eval()  # dropout off on both sides

    originals = SENTENCES[:8]
    noisy = add_noise(originals, noise_rng(0, 0, 0))
    loss_theirs = theirs([st.preprocess(noisy), st.preprocess(originals)], None)
    target_ids, target_mask = encoder.pad(encoder.tokenize(originals))
    loss_ours = decoder_loss(decoder, cls_pool(encoder.forward_ids(encoder.tokenize(noisy))), target_ids, target_mask)
    torch.testing.assert_close(loss_ours, loss_theirs, rtol=1e-5, atol=1e-5)

    loss_theirs.backward()
    loss_ours.backward()
    names = ("embeddings.word_embeddings.weight", "encoder.layer.0.attention.self.query.weight",
             "encoder.layer.1.output.dense.weight")
    ours = {n: p.grad for n, p in encoder.model.named_parameters() if n in names}
    want = {n: p.grad for n, p in st.transformers_model.named_parameters() if n in names}
    own = ("bert.encoder.layer.0.crossattention.self.value.weight", "cls.predictions.transform.dense.weight",
           *(() if tie else ("bert.encoder.layer.1.attention.self.query.weight",)))
    ours |= {n: p.grad for n, p in decoder.named_parameters() if n in own}
    want |= {n: p.grad for n, p in theirs.decoder.named_parameters() if n in own}
    assert len(want) == len(names) + len(own)
    assert_same_gradients(ours, want)
