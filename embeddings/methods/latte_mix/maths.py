"""Latte-Mix (Li et al.): the tensor maths of a token-level VAE on frozen token states (Eq. 2-4, App. A.4-A.6).

``mixture_js_divergence`` and ``mixture_l2_distance`` return DISTANCES (>= 0), the scorer negates them; the other
comparisons are similarities already.
"""

from __future__ import annotations

import logging
import math

import torch

from sts_lightning.embeddings.scoring.similarity import cosine_rows

log = logging.getLogger(__name__)

ACTIVE_UNIT_NATS = 0.01  # a unit whose average KL is below this carries no information (collapsed)
LOG_FLOOR = -1000.0  # log-scale Gaussian-mixture L2: log(L2 + e^-1000), so identical mixtures stay finite
F32_SAFE_LOG = 80.0  # |log L2| beyond this does not survive the float32 cast of ``Scorer.score_pairs``
PAIR_BUDGET = 1 << 22  # float64 elements of one (rows, Ta, Tb, Dz) block of the mixture L2


def _f32(x: torch.Tensor) -> torch.Tensor:
    """At least float32: KL and entropies in bf16 (mixed precision training) lose most of their digits."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def gumbel_softmax(logits: torch.Tensor, tau: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Relaxed one-hot sample over the last dim (Eq. 4): ``softmax((log pi + g) / tau)``, ``g = -log(-log u)``
    (footnote 1) with u clamped inside (0, 1); ``logits`` may be unnormalised."""
    work = _f32(logits)
    device = logits.device if generator is None else generator.device
    u = torch.rand(logits.shape, generator=generator, device=device, dtype=work.dtype).to(logits.device)
    info = torch.finfo(work.dtype)
    g = -torch.log(-torch.log(u.clamp(info.tiny, 1.0 - info.eps)))
    return torch.softmax((work + g) / tau, dim=-1).to(logits.dtype)


def categorical_kl_uniform(logits: torch.Tensor) -> torch.Tensor:
    """``KL(softmax(logits) || Uniform(K))`` over the last dim (Eq. 3); ``log_softmax`` stays finite near one-hot."""
    log_q = torch.log_softmax(_f32(logits), dim=-1)
    return (log_q.exp() * log_q).sum(-1) + math.log(logits.shape[-1])


def gaussian_kl_standard(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """``KL(N(mu, exp(logvar)) || N(0, 1))`` per latent dimension: the Normal VAE's term of Eq. 3."""
    mu, logvar = _f32(mu), _f32(logvar)
    return 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar)


def thresholded_kl(kl_per_unit: torch.Tensor, mask: torch.Tensor,
                   threshold: float) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Free bits (App. A.4) against KL vanishing: each unit's KL ``(B, T, U)``, averaged over real tokens, pays at
    least ``threshold``. Returns the loss and detached stats."""
    real = mask.bool().unsqueeze(-1)
    kl = kl_per_unit.masked_fill(~real, 0.0)  # not a product: padding garbage (inf, nan) must not leak
    avg = kl.sum((0, 1)) / real.sum().clamp_min(1)
    loss = avg.clamp_min(threshold).sum()
    stats = {
        "kl_raw": avg.sum().detach(),
        "active_units": (avg > ACTIVE_UNIT_NATS).sum().detach(),
        "frac_below_threshold": (avg < threshold).float().mean().detach(),
    }
    return loss, stats


def _entropy(p: torch.Tensor) -> torch.Tensor:
    return -torch.special.xlogy(p, p).sum(-1)


def _masked_weights(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``(B, T)`` token weights ``1/T_real`` (0 on padding); a sentence without real tokens is an error."""
    m = mask.to(dtype)
    lengths = m.sum(1, keepdim=True)
    if bool((lengths == 0).any()):
        raise ValueError("a sentence has no real tokens (empty mask row): its mixture is undefined")
    return m / lengths


def token_mixture(per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(B, T, ...)`` -> ``(B, ...)``: mean over real tokens, the sentence mixture of Eq. 2."""
    w = _masked_weights(mask, per_token.dtype)
    w = w.view(*w.shape, *([1] * (per_token.dim() - 2)))
    return (per_token.masked_fill(w == 0, 0.0) * w).sum(1)  # masked_fill: padding may hold inf / nan


def class_usage(probs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Perplexity of the batch-aggregated ``(B, T, D, K)`` posterior per variable, mean over D (Sec. 2.5): ~1 is
    collapse, ~K all classes used."""
    real = mask.bool()[..., None, None]
    agg = _f32(probs).masked_fill(~real, 0.0).sum((0, 1)) / real.sum().clamp_min(1)  # (D, K)
    return _entropy(agg).exp().mean()


def mixture_cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine of flattened ``(n, D, K)`` categorical mixtures (the paper's best metric, App. A.5)."""
    return cosine_rows(a.flatten(1), b.flatten(1))


def mixture_js_divergence(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence (nats, float64, clamped at 0 against rounding) of ``(n, D, K)`` mixtures, summed
    over the D variables."""
    p, q = a.double(), b.double()
    js = (_entropy(0.5 * (p + q)) - 0.5 * (_entropy(p) + _entropy(q))).clamp_min(0.0)
    return js.sum(-1).float()


def mixture_l2_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Euclidean distance (>= 0) of flattened ``(n, D, K)`` mixtures; the scorer's similarity is its negative."""
    return (a.double() - b.double()).flatten(1).norm(dim=-1).float()


def _log_cross(mu_a, var_a, mask_a, mu_b, var_b, mask_b) -> torch.Tensor:
    """``log int p q`` per row of diagonal Gaussian mixtures: ``int N(x; a, A) N(x; b, B) dx = N(a; b, A + B)``,
    combined by a masked logsumexp, chunked over rows."""
    n, dz = mu_a.shape[0], mu_a.shape[-1]
    wa = _masked_weights(mask_a, torch.float64).log()  # log(1/T) on real tokens, -inf on padding
    wb = _masked_weights(mask_b, torch.float64).log()
    rows = max(1, PAIR_BUDGET // (mask_a.shape[1] * mask_b.shape[1] * dz))
    out = []
    for s in range(0, n, rows):
        sl = slice(s, s + rows)
        ta = int(mask_a[sl].bool().any(0).nonzero().max()) + 1  # drop padding past the chunk's last token
        tb = int(mask_b[sl].bool().any(0).nonzero().max()) + 1
        ma, va = mu_a[sl, :ta].double(), var_a[sl, :ta].double()
        mb, vb = mu_b[sl, :tb].double(), var_b[sl, :tb].double()
        cov = (va[:, :, None] + vb[:, None]).clamp_min(1e-300)  # (c, Ta, Tb, Dz)
        maha = ((ma[:, :, None] - mb[:, None]).pow(2) / cov).sum(-1)
        log_n = -0.5 * (dz * math.log(2 * math.pi) + cov.log().sum(-1) + maha)
        log_w = wa[sl, :ta, None] + wb[sl, None, :tb]
        out.append(torch.logsumexp((log_n + log_w).flatten(1), dim=1))
    return torch.cat(out)


def _log_crosses(a: tuple, b: tuple) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``log int p^2``, ``log int p q``, ``log int q^2`` of ``(mu, var, mask)`` triples."""
    return _log_cross(*a, *a), _log_cross(*a, *b), _log_cross(*b, *b)


def gaussian_mixture_log_l2(mu_a: torch.Tensor, var_a: torch.Tensor, mask_a: torch.Tensor,
                            mu_b: torch.Tensor, var_b: torch.Tensor, mask_b: torch.Tensor) -> torch.Tensor:
    """``log ||p - q||_2`` (float64, ``-inf`` where p = q) of Gaussian mixtures (Sec. 4.2): ``L2^2 = int p^2 -
    2 int p q + int q^2`` in log space. ``mu``/``var`` ``(n, T, Dz)`` padded, ``mask`` ``(n, T)``."""
    aa, ab, bb = _log_crosses((mu_a, var_a, mask_a), (mu_b, var_b, mask_b))
    top = torch.maximum(torch.maximum(aa, ab), bb)
    rest = ((aa - top).exp() - 2 * (ab - top).exp() + (bb - top).exp()).clamp_min(0.0)
    return 0.5 * (top + rest.log())


def gaussian_mixture_log_cosine(mu_a: torch.Tensor, var_a: torch.Tensor, mask_a: torch.Tensor,
                                mu_b: torch.Tensor, var_b: torch.Tensor, mask_b: torch.Tensor) -> torch.Tensor:
    """``log`` of the densities' cosine ``int pq / sqrt(int p^2 int q^2)`` (<= 0). Not in the paper: L2's self-terms
    scale like ``sigma^-Dz`` and rank sentences by their posterior variances; normalising removes that."""
    aa, ab, bb = _log_crosses((mu_a, var_a, mask_a), (mu_b, var_b, mask_b))
    return (ab - 0.5 * (aa + bb)).clamp_max(0.0).float()


def gaussian_mixture_l2(mu_a: torch.Tensor, var_a: torch.Tensor, mask_a: torch.Tensor,
                        mu_b: torch.Tensor, var_b: torch.Tensor, mask_b: torch.Tensor,
                        scale: str = "auto") -> torch.Tensor:
    """Similarity ``-L2`` of Gaussian mixtures (Sec. 4.2). L2 often leaves float32 range, so ``scale="log"`` gives
    ``-log(L2 + e^LOG_FLOOR)`` (same ranking); ``"auto"``: linear if this call's nonzero L2s lie in ``e^[-80, 80]``,
    else log for the whole call, with a warning."""
    log_l2 = gaussian_mixture_log_l2(mu_a, var_a, mask_a, mu_b, var_b, mask_b)
    if scale == "auto":
        finite = log_l2[torch.isfinite(log_l2)]
        fits = finite.numel() == 0 or bool(finite.abs().max() <= F32_SAFE_LOG)
        if not fits:
            log.warning("Gaussian-mixture L2 spans e^[%.0f, %.0f], outside float32: scoring -log(L2) "
                        "(same ranking) for this call", float(finite.min()), float(finite.max()))
        scale = "linear" if fits else "log"
    if scale == "linear":
        return -log_l2.exp().float()
    if scale == "log":
        return -torch.logaddexp(log_l2, torch.full_like(log_l2, LOG_FLOOR)).float()
    raise ValueError(f"scale must be 'auto', 'linear' or 'log', got {scale!r}")


__all__ = [
    "categorical_kl_uniform", "class_usage", "cosine_rows", "gaussian_kl_standard", "gaussian_mixture_l2", "gaussian_mixture_log_cosine",
    "gaussian_mixture_log_l2", "gumbel_softmax", "mixture_cosine", "mixture_js_divergence", "mixture_l2_distance",
    "thresholded_kl", "token_mixture",
]
