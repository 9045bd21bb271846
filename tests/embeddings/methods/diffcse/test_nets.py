"""DiffCSE's nets (embeddings.methods.diffcse.nets): the projection MLP, the conditional discriminator, the
generator's loading."""

from __future__ import annotations

import pytest
import torch
from transformers import BertModel

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.diffcse.nets import (
    ConditionalDiscriminator,
    load_generator,
    projection_mlp,
    same_vocabulary,
)


def test_projection_mlp_is_the_authors_batchnorm_head():
    torch.manual_seed(0)
    head = projection_mlp(8, init_std=0.02)
    assert [type(m).__name__ for m in head] == ["Linear", "BatchNorm1d", "ReLU", "Linear", "BatchNorm1d"]
    assert head[0].bias is None and head[3].bias is None and not head[4].affine
    assert head[0].weight.shape == (16, 8) and abs(head[0].weight.std().item() - 0.02) < 0.01
    out = head.train()(torch.randn(6, 8))
    torch.testing.assert_close(out.mean(0), torch.zeros(8), atol=1e-5, rtol=0)  # normalised over the batch


def test_the_condition_replaces_the_first_embedding_and_only_it(tiny_model_dir, one_thread):
    encoder = BertModel.from_pretrained(tiny_model_dir).eval()
    disc = ConditionalDiscriminator(encoder).eval()
    assert disc.encoder.pooler is None and encoder.pooler is not None  # a copy: the encoder is not changed
    theirs = encoder.state_dict()
    assert {k for k in theirs if not k.startswith("pooler.")} == set(disc.encoder.state_dict())
    for name, mine in disc.encoder.state_dict().items():
        assert torch.equal(mine, theirs[name]), name
    ids = torch.tensor([[2, 8, 9, 3], [2, 10, 3, 0]])
    mask = (ids != 0).long()
    a, b = torch.randn(2, 32), torch.randn(2, 32)
    with torch.no_grad():
        out_a, out_b = disc(ids, mask, a), disc(ids, mask, b)
    assert out_a.shape == (2, 4, 2) and not torch.allclose(out_a, out_b)
    with torch.no_grad():  # the hook is gone after the call: a plain forward is the copied encoder's
        torch.testing.assert_close(disc.encoder(input_ids=ids, attention_mask=mask).last_hidden_state,
                                   encoder(input_ids=ids, attention_mask=mask).last_hidden_state)


def test_the_generator_is_a_frozen_masked_lm_and_a_headless_model_is_refused(tiny_model_dir, one_thread):
    model, tokenizer = load_generator(f"{tiny_model_dir}-mlm")
    assert not any(p.requires_grad for p in model.parameters())
    assert same_vocabulary(tokenizer.get_vocab(), tokenizer.get_vocab())
    with pytest.raises(ConfigError, match=r"model.generator=.* has no MLM head"):
        load_generator(str(tiny_model_dir))
    with pytest.raises(ConfigError, match="could not load a masked LM from model.generator="):
        load_generator(str(tiny_model_dir / "nowhere"))
