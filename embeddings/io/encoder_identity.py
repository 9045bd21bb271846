"""What identifies a loaded encoder's weights: a head fitted on one encoder must refuse another.

A fitted head (BERT-whitening's ``mu`` and ``W``) is meaningless on another encoder of the same width. An export
records name, width, precision and a SHA-256 over the parameters rounded to bf16 (fp32 and bf16 loads agree)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping

import torch

from sts_lightning.embeddings.errors import ConfigError

DIGEST_KEY = "weights_bf16_sha256"
ALLOW_OPTION = "allow_other_encoder"  # the scorer option that lets a user score on another encoder anyway

log = logging.getLogger(__name__)


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
    return tensors_sha256(tensors, floats_as=torch.bfloat16)


def tensors_sha256(tensors, floats_as: torch.dtype | None = None) -> str:
    """SHA-256 over each ``(name, tensor)``'s name, shape and bytes; floating tensors cast to ``floats_as`` first."""
    digest = hashlib.sha256()
    for name, tensor in tensors:
        t = tensor.detach()
        if floats_as is not None and t.is_floating_point():
            t = t.to(floats_as)
        digest.update(name.encode())
        digest.update(str(tuple(t.shape)).encode())
        digest.update(t.cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def encoder_precision(encoder) -> str:
    """The precision an encoder computes in (``fp32`` for encoders without the setting, e.g. static vectors)."""
    return str(getattr(encoder, "precision", None) or "fp32")


def encoder_identity(encoder, name: str | None = None, precision: str | None = None) -> dict:
    """``{"name", "hidden_size", DIGEST_KEY, "precision"}`` of a loaded encoder; ``precision``: the one the fitted
    vectors were computed in, when not the encoder's own (features cached in bf16)."""
    return {"name": str(name if name is not None else encoder.name), "hidden_size": int(encoder.hidden_size),
            DIGEST_KEY: weights_digest(encoder), "precision": str(precision or encoder_precision(encoder))}


def width_mismatch(recorded: Mapping, encoder) -> str | None:
    """``"32-d vectors vs 16-d"`` when the recorded width is not the encoder's, else ``None``."""
    if int(recorded.get("hidden_size", encoder.hidden_size)) != int(encoder.hidden_size):
        return f"{recorded['hidden_size']}-d vectors vs {encoder.hidden_size}-d"
    return None


def identity_mismatch(recorded: Mapping, encoder, **settings) -> str | None:
    """Why ``encoder`` is not the recorded one (width, weights' digest, precision, ``settings``; never the names
    alone), or ``None`` when it is or cannot tell."""
    why = width_mismatch(recorded, encoder)
    if why is not None:
        return why
    reasons = []
    want = recorded.get(DIGEST_KEY)
    got = weights_digest(encoder) if want is not None else None
    if got is not None and got != want:
        reasons.append(f"other weights (bf16 digest {want[:12]} vs {got[:12]})")
    if recorded.get("precision") and recorded["precision"] != encoder_precision(encoder):
        reasons.append(f"fitted on {recorded['precision']} vectors, these are {encoder_precision(encoder)}: "
                       f"encoder.precision={recorded['precision']} matches")
    reasons += [f"{key} {recorded[key]!r} vs {value!r}" for key, value in settings.items()
                if value is not None and recorded.get(key) is not None and str(recorded[key]) != str(value)]
    return "; ".join(reasons) or None


def check_fitted_on(recorded: Mapping | None, encoder, export: str, allow_other_encoder: bool = False,
                    width: int | None = None, **settings) -> None:
    """Refuse to score a fitted export on another encoder than its own (one ``ConfigError`` line); ``recorded=None``
    (an older export) checks ``width`` only. ``allow_other_encoder`` warns instead, unless the width differs."""
    if recorded is None:
        log.warning("%s records no encoder identity (written before identities were recorded): cannot check "
                    "that %r is the encoder it was fitted on", export, encoder.name)
        recorded = {} if width is None else {"hidden_size": int(width)}
    why = identity_mismatch(recorded, encoder, **settings)
    if why is None:
        return
    fitted = recorded.get("name")
    what = f"{export} was fitted on {f'encoder {fitted!r}' if fitted else 'another encoder'}, not on {encoder.name!r} ({why})"
    if width_mismatch(recorded, encoder) is not None:
        raise ConfigError(f"{what}: its fitted maps apply to no other width")
    if allow_other_encoder:
        log.warning("%s; scoring anyway (%s: true)", what, ALLOW_OPTION)
        return
    raise ConfigError(f"{what}: fit it again on this encoder, or add {ALLOW_OPTION}: true to the scorer to score "
                      "anyway")
