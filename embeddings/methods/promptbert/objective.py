"""PromptBERT's training objective (Jiang et al. 2022): the authors' ``cl_forward`` is SimCSE's on denoised [MASK]
states, so the loss is ``simcse_loss``."""

from __future__ import annotations

from torch import Tensor, nn

from sts_lightning.embeddings.methods.simcse.objective import simcse_loss

__all__ = ["prompt_vectors", "promptbert_loss"]


def prompt_vectors(states: Tensor, noise: Tensor | None = None, lengths: Tensor | None = None,
                   head: nn.Module | None = None, head_first: bool = False) -> Tensor:
    """A view's vectors: ``states`` minus the template-only ``noise[lengths]``, through ``head`` before subtracting
    (``head_first``: supervised, ``head(states) - head(noise)``) or after (unsupervised)."""
    picked = None if noise is None else noise[lengths.to(noise.device)]
    if head is None:
        return states if picked is None else states - picked
    if picked is None:
        return head(states)
    return head(states) - head(picked) if head_first else head(states - picked)


def promptbert_loss(views: list[Tensor], temperature: float = 0.05, hard_negative_weight: float = 0.0,
                    gather: bool = True) -> Tensor:
    """InfoNCE of view 0 against view 1 (and view 2, NLI hard negatives, when given): ``simcse_loss``."""
    if len(views) not in (2, 3):
        raise ValueError(f"PromptBERT's loss takes 2 views (sentence pairs) or 3 (NLI triplets), got {len(views)}")
    return simcse_loss(views[0], views[1], views[2] if len(views) == 3 else None, temperature=temperature,
                       hard_negative_weight=hard_negative_weight, gather=gather)
