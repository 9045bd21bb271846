"""The prompt-based sentence vector (PromptBERT, Jiang et al. 2022), training-free on any masked-LM encoder: the
authors' ``evaluation.py`` with ``--mask_embedding_sentence`` (``denoise``: ``--mask_embedding_sentence_delta``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.errors import ConfigError, UnsupportedError
from sts_lightning.embeddings.methods.promptbert.head import load_head
from sts_lightning.embeddings.methods.promptbert.states import mask_pooling, template_states
from sts_lightning.embeddings.methods.promptbert.template import (
    DEFAULT,
    Template,
    eval_ids,
    mask_slot,
    prefix_length,
    template_only,
)
from sts_lightning.embeddings.scoring.scorer import Representation, VectorScorer


def masked_lm_parts(encoder: BaseEncoder, what: str = "scorer prompt"):
    """``(tokenizer, model)`` of an encoder that can read a [MASK] state; one line where it cannot (GloVe, e5)."""
    tokenizer, model = getattr(encoder, "tokenizer", None), getattr(encoder, "model", None)
    if tokenizer is None or model is None or getattr(tokenizer, "mask_token", None) is None:
        raise UnsupportedError(f"{what} needs a transformer encoder whose tokenizer has a mask token; "
                               f"{getattr(encoder, 'name', encoder)!r} has none")
    return tokenizer, model


class TemplateDenoiser:
    """The template-only [MASK] states of one template for one model, cached by sentence length (no gradients)."""

    def __init__(self, tokenizer, model: torch.nn.Module, template: Template) -> None:
        self.model = model
        self.ids = template_only(tokenizer, template)
        self.prefix = prefix_length(tokenizer, template)
        self.mask = mask_slot(tokenizer, template) % len(self.ids)
        self.known: dict[int, torch.Tensor] = {}

    def __call__(self, lengths: Sequence[int]) -> torch.Tensor:
        """``(len(lengths), hidden)`` float32 CPU states, row ``i`` for a sentence of ``lengths[i]`` tokens."""
        missing = sorted(set(int(n) for n in lengths) - set(self.known))
        if missing:
            with torch.inference_mode():
                states = template_states(self.model, self.ids, self.prefix, self.mask, torch.tensor(missing))
            self.known.update(zip(missing, states.float().cpu(), strict=True))
        return torch.stack([self.known[int(n)] for n in lengths])


class PromptScorer(VectorScorer):
    """Cosine of the prompt-based sentence vectors; ``head`` (a supervised PromptBERT export directory, or the head
    module) is applied to both states first."""

    def __init__(self, encoder: BaseEncoder, template: str = DEFAULT, denoise: bool = False,
                 head: str | torch.nn.Module | None = None,
                 add_period: bool = True, batch_size: int | None = None) -> None:
        self.check_options({"template": template, "denoise": denoise, "add_period": add_period})
        self.encoder, self.template = encoder, Template(template, "scorer prompt: template")
        self.tokenizer, model = masked_lm_parts(encoder)
        self.slot = mask_slot(self.tokenizer, self.template)
        self.denoiser = TemplateDenoiser(self.tokenizer, model, self.template) if denoise else None
        # a path (an export, from a config) or the live head of a module in training
        self.head = head if head is None or isinstance(head, torch.nn.Module) else \
            load_head(head).to(getattr(encoder, "device", "cpu"))
        self.add_period, self.batch_size = bool(add_period), batch_size
        self.name = "prompt" + ("+denoise" if denoise else "")

    @staticmethod
    def check_options(options: dict) -> None:
        """One line for a bad template or switch, before any model loads (``check_scorer_spec`` calls it)."""
        if "template" in options:
            Template(options["template"], "scorer prompt: template")
        for key in ("denoise", "add_period"):
            if key in options and not isinstance(options[key], bool):
                raise ConfigError(f"scorer prompt: {key}={options[key]!r}: use true or false")

    def represent(self, sentences: Sequence[str]) -> Representation:
        ids, lengths = eval_ids(self.tokenizer, self.template, sentences, getattr(self.encoder, "max_length", None),
                                self.add_period)
        emb = self.encoder.encode(sentences, mask_pooling(self.slot), batch_size=self.batch_size,
                                  desc="prompt encode", ids=ids)
        emb = self._head(emb)
        if self.denoiser is not None:
            emb = emb - self._head(self.denoiser(lengths))
        return {"embedding": emb}

    def _head(self, states: torch.Tensor) -> torch.Tensor:
        if self.head is None:
            return states
        param = next(self.head.parameters())
        with torch.inference_mode():
            return self.head(states.to(param.device, param.dtype)).float().cpu()
