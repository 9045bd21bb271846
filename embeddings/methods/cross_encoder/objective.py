"""The cross-encoder's objectives, each equal to the sentence-transformers cross-encoder loss of its name.

``bce``: ``BinaryCrossEntropyLoss`` (its default for scores in [0, 1]: the logit against the gold score);
``mse``: ``MSELoss`` (sigmoid of the logit regressed onto the gold score, its activation for one label);
``nli``: ``CrossEntropyLoss`` over three logits (entailment, neutral, contradiction), SBERT's NLI cross-encoder.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from sts_lightning.embeddings.methods.shared.precision import in_fp32

OBJECTIVES = ("bce", "mse", "nli")


def labels_of(objective: str) -> int:
    """How many logits the head has for ``objective``."""
    return 3 if objective == "nli" else 1


@in_fp32
def pair_loss(objective: str, logits: Tensor, targets: Tensor) -> Tensor:
    """``logits``: ``(n, labels)``; ``targets``: gold scores in [0, 1] (``bce`` / ``mse``) or class ids (``nli``)."""
    if objective == "nli":
        return F.cross_entropy(logits, targets.long())
    if logits.shape[-1] != 1:
        raise ValueError(f"objective {objective!r} needs one logit per pair, got {tuple(logits.shape)}")
    scores = targets.to(logits.dtype)
    if objective == "mse":
        return F.mse_loss(logits[:, 0].sigmoid(), scores)
    return F.binary_cross_entropy_with_logits(logits[:, 0], scores)
