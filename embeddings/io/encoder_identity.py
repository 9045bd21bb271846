"""What identifies a loaded encoder's weights: a head fitted on one encoder must refuse another.

Why: a post-processor fitted on frozen pooled vectors (BERT-whitening's ``mu`` and ``W``) applies to the
encoder it was fitted on. Given another one with the same width -- a fine-tuned copy, a model of the same
family -- it silently produces plausible but meaningless vectors. A name is not enough (a directory
retrained in place keeps its name; the same weights can be named by a packaged short name or a path), and
``embeddings.io.fingerprint`` keys caches on file stats, which change when a model is copied. So the export
records the name, the width and a digest of the weights' VALUES: SHA-256 over every parameter rounded to
bfloat16, in ``state_dict`` order. Rounding to bf16 makes an fp32 and a bf16 load of the same weights agree
(both round to nearest) while any training step still changes the digest (some of millions of values cross
a bf16 rounding boundary). An fp16 load rounds differently, so its digest is not comparable: ``None``.
"""

from __future__ import annotations

import hashlib

import torch

DIGEST_KEY = "weights_bf16_sha256"


def weights_digest(encoder) -> str | None:
    """The bf16 digest of an encoder's weights (``model`` module or static ``vectors``); ``None`` when unknown."""
    model = getattr(encoder, "model", None)
    if isinstance(model, torch.nn.Module):
        tensors = list(model.state_dict().items())
    elif isinstance(getattr(encoder, "vectors", None), torch.Tensor):
        tensors = [("vectors", encoder.vectors)]
    else:
        return None
    if any(t.dtype == torch.float16 for _, t in tensors):
        return None
    digest = hashlib.sha256()
    for name, tensor in tensors:
        t = tensor.detach()
        if t.is_floating_point():
            t = t.to(torch.bfloat16)
        digest.update(name.encode())
        digest.update(str(tuple(t.shape)).encode())
        digest.update(t.cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def encoder_identity(encoder, name: str | None = None) -> dict:
    """``{"name", "hidden_size", DIGEST_KEY}`` of a loaded encoder (``name``: how the config named it)."""
    return {"name": str(name if name is not None else encoder.name), "hidden_size": int(encoder.hidden_size),
            DIGEST_KEY: weights_digest(encoder)}


def identity_mismatch(recorded: dict, encoder) -> str | None:
    """Why ``encoder`` is not the recorded one (width or weights differ), or ``None`` when it is (or cannot tell).

    Names alone never decide: the same weights may be named differently, different weights alike.
    """
    if int(recorded.get("hidden_size", encoder.hidden_size)) != int(encoder.hidden_size):
        return f"{recorded['hidden_size']}-d vectors vs {encoder.hidden_size}-d"
    want = recorded.get(DIGEST_KEY)
    if want is None:
        return None
    got = weights_digest(encoder)
    if got is not None and got != want:
        return f"other weights (bf16 digest {want[:12]} vs {got[:12]})"
    return None
