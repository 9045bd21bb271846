"""The packed (padding-free) forward equals the padded one: token states of every layer, masks, every pooling,
SBERT-WK and Sen2Pro's inputs, with gradients too; and it refuses what it cannot run, in one line."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.encoders.packing import PACKED, pack_ids, packed_attention
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.pooling import POOLINGS, get_pooling
from sts_lightning.embeddings.methods.sbert_wk import SBERTWKScorer
from sts_lightning.embeddings.methods.sen2pro.scorer import Sen2ProScorer
from tests.tolerance import TINY_BERT

SENTENCES = ["a man plays a guitar .", "a dog runs .", "two children sing a song in the park .", "the cat .",
             "a woman cuts an onion in the kitchen .", "a boy rides a bike on the street ."]


@pytest.fixture()
def pair(tiny_model_dir):
    """The same weights twice: one encoder forced padded, one forced packed."""
    padded = HFEncoder.from_pretrained(str(tiny_model_dir), max_length=32, batch_size=4, packing="padded")
    packed = HFEncoder.from_pretrained(str(tiny_model_dir), max_length=32, batch_size=4, packing="packed")
    assert packed.packs_batches and not padded.packs_batches
    return padded, packed


def _batches(pair, sentences):
    padded, packed = pair
    ids = padded.tokenize(sentences)
    with torch.inference_mode():
        return padded.forward_ids(ids), packed.forward_ids(ids)


def test_every_layer_and_mask_equal(pair):
    a, b = _batches(pair, SENTENCES)
    assert b.num_layers == a.num_layers
    torch.testing.assert_close(b.attention_mask, a.attention_mask)
    torch.testing.assert_close(b.special_tokens_mask, a.special_tokens_mask)
    real = a.attention_mask.bool()
    for layer in range(a.num_layers):  # real tokens equal; padding is zeros in the packed batch (masked by all)
        torch.testing.assert_close(b.hidden_states[layer][real], a.hidden_states[layer][real], **TINY_BERT)
        assert not b.hidden_states[layer][~real].any()
    torch.testing.assert_close(b.stacked(1)[:, real], a.stacked(1)[:, real], **TINY_BERT)
    assert isinstance(b.hidden_states, tuple)  # torch.stack / torch.cat take it as they take the padded one


@pytest.mark.parametrize("name", sorted(POOLINGS))
def test_every_pooling_equal(pair, name):
    a, b = _batches(pair, SENTENCES)
    pool = get_pooling(name)
    torch.testing.assert_close(pool(b), pool(a), **TINY_BERT)


def test_pooled_vectors_through_encode_equal(pair):
    padded, packed = pair
    for encoder in pair:  # a token budget rather than a count: the packed one counts real tokens
        encoder.batch_size, encoder.max_tokens = None, 24
    pool = get_pooling("mean")
    torch.testing.assert_close(packed.encode(SENTENCES * 2, pool), padded.encode(SENTENCES * 2, pool), **TINY_BERT)


@pytest.mark.parametrize("variant", ["code", "paper"])
def test_sbert_wk_equal(pair, variant):
    padded, packed = pair
    a = SBERTWKScorer(padded, layer_start=0, variant=variant).represent(SENTENCES)["embedding"]
    b = SBERTWKScorer(packed, layer_start=0, variant=variant).represent(SENTENCES)["embedding"]
    torch.testing.assert_close(b, a, **TINY_BERT)


def test_sen2pro_equal(pair):
    """Sen2Pro's deterministic passes (augmented copies) run packed; its MC-dropout passes run padded (their fast
    dropout attention is its own), so with one seed both encoders draw the same samples."""
    padded, packed = pair
    a = Sen2ProScorer(padded, n_samples=3, seed=0).represent(SENTENCES[:3])
    b = Sen2ProScorer(packed, n_samples=3, seed=0).represent(SENTENCES[:3])
    for key in a:
        torch.testing.assert_close(b[key], a[key], **TINY_BERT)


def test_gradients_equal(pair):
    """``forward_ids`` with gradients (GradCache, embed_length_buckets): the same loss gradient on the weights."""
    grads = []
    for encoder in pair:
        encoder.model.zero_grad()
        ids = encoder.tokenize(SENTENCES)
        get_pooling("mean")(encoder.forward_ids(ids)).square().sum().backward()
        grads.append(encoder.model.embeddings.word_embeddings.weight.grad.clone())
    torch.testing.assert_close(grads[1], grads[0], **TINY_BERT)


def test_training_mode_packed_runs_with_dropout(pair):
    _, packed = pair
    with torch.inference_mode(), packed.stochastic():
        ids = packed.tokenize(SENTENCES[:2])
        a, b = get_pooling("mean")(packed.forward_ids(ids)), get_pooling("mean")(packed.forward_ids(ids))
    assert not torch.allclose(a, b) and torch.isfinite(a).all()


def test_layout_indices():
    input_ids, positions, layout = pack_ids([[5, 6, 7], [8]], torch.device("cpu"))
    assert input_ids.tolist() == [[5, 6, 7, 8]] and positions.tolist() == [[0, 1, 2, 0]]
    assert layout.flat.tolist() == [0, 1, 2, 3] and layout.cu_seqlens.tolist() == [0, 3, 4]
    assert layout.attention_mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert layout.key_mask.shape == (2, 1, 1, 3)


def test_other_calls_go_to_sdpa():
    """Outside a packed forward the registered function is transformers' sdpa (another model sharing it)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    q = torch.randn(2, 2, 5, 4)
    module = torch.nn.Module()
    module.is_causal = False
    out, _ = packed_attention(module, q, q, q, None)
    torch.testing.assert_close(out, sdpa_attention_forward(module, q, q, q, None)[0])


def test_refuses_packing_what_it_cannot(tiny_model_dir):
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(tiny_model_dir), attn_implementation="eager")
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    with pytest.raises(ConfigError, match="cannot run packed: attention 'eager'"):
        HFEncoder(model, tokenizer, packing="packed")
    assert not HFEncoder(model, tokenizer, packing="auto").packs_batches
    with pytest.raises(ConfigError, match="encoder.packing='yes'"):
        HFEncoder(model, tokenizer, packing="yes")


def test_config_restored_after_packed_forward(pair):
    _, packed = pair
    _batches(pair, SENTENCES[:2])
    assert packed.model.config._attn_implementation == "sdpa" != PACKED


def test_auto_on_the_cpu_packs_inference_only(tiny_model_dir):
    """CPU: packed without gradients (measured faster), padded in training mode and whenever gradients flow (a
    method that trains in eval mode, CT without dropout: CPU training unchanged)."""
    encoder = HFEncoder.from_pretrained(str(tiny_model_dir), packing="auto")
    with torch.inference_mode():
        assert encoder.packs_batches
        with encoder.stochastic():
            assert not encoder.packs_batches
    assert not encoder.packs_batches  # eval mode, gradients on
    with torch.inference_mode():
        assert not HFEncoder.from_pretrained(str(tiny_model_dir), packing="padded").packs_batches


def test_gradient_checkpointing_runs_padded_and_its_backward_works(pair):
    """The backward pass recomputes each layer outside the packed block: with checkpointing on, a pass with
    gradients runs padded (found by CI: CT with gradient_checkpointing failed torch's recomputation check)."""
    padded, packed = pair
    grads = []
    for encoder in pair:
        encoder.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        encoder.model.train()
        assert not encoder.packs_batches
        encoder.model.zero_grad()
        with torch.random.fork_rng():
            torch.manual_seed(0)
            get_pooling("mean")(encoder.forward_ids(encoder.tokenize(SENTENCES))).square().sum().backward()
        grads.append(encoder.model.embeddings.word_embeddings.weight.grad.clone())
        with torch.inference_mode():
            assert encoder.packs_batches == (encoder is packed)  # no gradients, nothing to recompute: packed again
    torch.testing.assert_close(grads[1], grads[0], **TINY_BERT)
