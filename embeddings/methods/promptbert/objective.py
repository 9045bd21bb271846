"""PromptBERT's training objective (Jiang et al. 2022) as pure functions on tensors.

Each view of a sentence is the [MASK] state of a template around it (``states``); template denoising subtracts
the same template's [MASK] state with no sentence in it, at the positions a sentence of that length gives it
(``noise``, one row per length, picked by ``lengths``). The vectors then go through the recipe's head and into
SimCSE's InfoNCE: the authors' ``cl_forward`` (kongds/Prompt-BERT ``prompt_bert/models.py``) is SimCSE's with the
pooled output replaced by these vectors, so the contrastive part is ``simcse_loss`` itself.

Where the head sits is the two recipes' difference (``cl_forward``):

- unsupervised (``--mlp_only_train``, SimCSE's ``Linear + tanh``): ``head(states - noise)``;
- supervised (``--mask_embedding_sentence_org_mlp``, BERT's MLM transform): ``head(states) - head(noise)``.
"""

from __future__ import annotations

from torch import Tensor, nn

from sts_lightning.embeddings.methods.simcse.objective import simcse_loss

__all__ = ["prompt_vectors", "promptbert_loss"]


def prompt_vectors(states: Tensor, noise: Tensor | None = None, lengths: Tensor | None = None,
                   head: nn.Module | None = None, head_first: bool = False) -> Tensor:
    """The vectors a view contributes to the loss.

    Args:
        states: ``(batch, hidden)`` [MASK] states of the prompted sentences.
        noise: ``(k, hidden)`` template-only [MASK] states (``None``: no denoising).
        lengths: ``(batch,)`` row of ``noise`` for each sentence (its token count, or an index into the lengths
            ``noise`` was computed for).
        head: the recipe's head, or ``None``.
        head_first: apply ``head`` to both states before subtracting (supervised), else after (unsupervised).
    """
    picked = None if noise is None else noise[lengths.to(noise.device)]
    if head is None:
        return states if picked is None else states - picked
    if picked is None:
        return head(states)
    return head(states) - head(picked) if head_first else head(states - picked)


def promptbert_loss(views: list[Tensor], temperature: float = 0.05, hard_negative_weight: float = 0.0,
                    gather: bool = True) -> Tensor:
    """InfoNCE of view 0 (anchors) against view 1 (positives) and view 2 (hard negatives, NLI) when given:
    ``cl_forward``'s loss, i.e. ``simcse_loss`` (DDP: candidates gathered WITH gradients, see there)."""
    if len(views) not in (2, 3):
        raise ValueError(f"PromptBERT's loss takes 2 views (sentence pairs) or 3 (NLI triplets), got {len(views)}")
    return simcse_loss(views[0], views[1], views[2] if len(views) == 3 else None, temperature=temperature,
                       hard_negative_weight=hard_negative_weight, gather=gather)
