"""DiffCSE's training nets: the BatchNorm projection head, the conditional discriminator and the frozen generator.

As voidism/DiffCSE; a generator whose MLM head would be new is refused (it would edit at random).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import torch
from torch import Tensor, nn

from sts_lightning.embeddings.encoders.packaged import bert_uncased_tokenizer_dir, packaged_model
from sts_lightning.embeddings.methods.mlm.masked_lm import load_masked_lm

__all__ = ["ConditionalDiscriminator", "load_generator", "other_vocabulary", "packaged_vocabulary", "projection_mlp",
           "same_vocabulary"]


def projection_mlp(dim: int, init_std: float = 0.02) -> nn.Sequential:
    """The authors' ``ProjectionMLP`` (``--batchnorm``) on ``dim``-wide vectors, linears initialised as BERT's."""
    head = nn.Sequential(nn.Linear(dim, 2 * dim, bias=False), nn.BatchNorm1d(2 * dim), nn.ReLU(inplace=True),
                         nn.Linear(2 * dim, dim, bias=False), nn.BatchNorm1d(dim, affine=False))
    for layer in (head[0], head[3]):
        nn.init.normal_(layer.weight, std=init_std)
    return head


class ConditionalDiscriminator(nn.Module):
    """Per-token replaced / kept logits of edited sentences from a copy of the starting encoder whose first position's
    embedding is the sentence vector (the authors' ``cls_input``)."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = copy.deepcopy(encoder)
        if getattr(self.encoder, "pooler", None) is not None:
            self.encoder.pooler = None  # the authors' BertModel(add_pooling_layer=False): nothing reads it
        self.head = nn.Linear(int(self.encoder.config.hidden_size), 2)

    def forward(self, input_ids: Tensor, attention_mask: Tensor, condition: Tensor) -> Tensor:
        """``(rows, length, 2)`` logits; ``condition`` ``(rows, hidden)`` replaces the first position's embedding."""

        def put(module: nn.Module, args: tuple, output: Tensor) -> Tensor:
            return torch.cat([condition.unsqueeze(1).to(output.dtype), output[:, 1:]], dim=1)

        handle = self.encoder.embeddings.register_forward_hook(put)
        try:
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        finally:
            handle.remove()
        return self.head(hidden)


def load_generator(name_or_path: str, key: str = "model.generator"):
    """(the frozen masked LM, its tokenizer); ``ConfigError`` naming ``key`` if it cannot load or has no MLM head."""
    model, tokenizer = load_masked_lm(name_or_path, key=key, require_head=True)
    model.requires_grad_(False)
    return model, tokenizer


def same_vocabulary(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    """Whether two tokenizers' ``get_vocab()`` agree: the generator's ids must be the encoder's word pieces."""
    return dict(a) == dict(b)


def packaged_vocabulary(name: str) -> dict[str, int] | None:
    """The word pieces of a packaged masked LM, from its shipped tokenizer files; ``None`` for any other name."""
    model = packaged_model(name)
    if model is None or not model.masked_lm:
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(bert_uncased_tokenizer_dir())).get_vocab()


def other_vocabulary(generator: str, encoder: str, generator_size: int, encoder_size: int) -> str:
    """The one line refusing a generator whose word pieces are not the encoder's, saying what to pass instead."""
    return (f"model.generator={generator!r} has another vocabulary than the encoder {encoder!r} ({generator_size} vs "
            f"{encoder_size} word pieces): its edits must be the encoder's word pieces; pass a masked LM over the "
            f"encoder's vocabulary: offline the export of python train.py model=mlm "
            f"model.model_name_or_path={encoder} (model.generator=<run>/export), "
            "online a hub masked LM (the paper's distilroberta-base for RoBERTa)")
