"""Latte-Mix scorer: frozen token states -> trained VAE posterior per token -> sentence mixture (Eq. 2) -> distance.

``posterior(features (N, H))`` returns ``OUTPUTS[latent]``; at test time the categorical posterior is
``softmax(logits / tau)`` without Gumbel noise (App. A.5).
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence

import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder, validate_sentences
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.encoders.token_batch import TokenBatch
from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.io.encoder_identity import check_fitted_on
from sts_lightning.embeddings.io.export_dir import load_export_config
from sts_lightning.embeddings.methods.latte_mix.maths import (
    gaussian_mixture_l2,
    gaussian_mixture_log_cosine,
    mixture_cosine,
    mixture_js_divergence,
    mixture_l2_distance,
    token_mixture,
)
from sts_lightning.embeddings.methods.latte_mix.nets import EXPORT_FORMAT, load_token_vae
from sts_lightning.embeddings.scoring.reading import Reading, layer_reading
from sts_lightning.embeddings.scoring.scorer import Representation, Scorer
from sts_lightning.embeddings.scoring.similarity import cosine_rows

# Valid distances per latent type; the first is the default.
DISTANCES: dict[str, tuple[str, ...]] = {"categorical": ("cosine", "js", "l2"), "normal": ("l2", "cosine"), "ae": ("cosine",)}
OUTPUTS = {"categorical": {"logits": 3}, "normal": {"mu": 2, "logvar": 2}, "ae": {"code": 2}}  # key -> ndim


def check_combination(latent: str, distance: str | None = None) -> str:
    """The distance to use for ``latent`` (``None``: its default); a ConfigError for an invalid pair, at start-up."""
    if latent not in DISTANCES:
        raise unknown_choice("latte-mix latent", latent, DISTANCES)
    distance = DISTANCES[latent][0] if distance is None else distance
    if distance not in DISTANCES[latent]:
        valid = "; ".join(f"{name}: {'/'.join(d)}" for name, d in DISTANCES.items())
        raise ConfigError(f"latte-mix: latent {latent!r} has no distance {distance!r}; valid combinations: {valid}")
    return distance


class LatteMixScorer(Scorer):
    """Sentence = mixture of its tokens' VAE posteriors on ``hidden_states[layer]``, compared by ``distance``
    (``None``: the latent's first in ``DISTANCES``). ``pad_tokens`` (normal latent): pad every representation to
    this many tokens, so DDP shards all-gather."""

    def __init__(self, encoder: BaseEncoder, posterior: torch.nn.Module, layer: int = -1,
                 latent: str = "categorical", distance: str | None = None, tau: float = 0.3,
                 batch_size: int | None = None, pad_tokens: int | None = None) -> None:
        distance = check_combination(latent, distance)
        self.pad_tokens = pad_tokens
        if isinstance(tau, bool) or not isinstance(tau, numbers.Real) or not float(tau) > 0:
            raise ConfigError(f"latte-mix tau must be a number > 0, got {tau!r}")
        n_layers = encoder.num_layers
        if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not -n_layers <= layer < n_layers:
            raise ConfigError(f"latte-mix layer {layer!r}: encoder {encoder.name} has hidden states "
                              f"0..{n_layers - 1} (or -{n_layers}..-1)")
        self.encoder, self.posterior = encoder, posterior
        self.layer, self.latent, self.distance = int(layer), latent, distance
        self.tau, self.batch_size = float(tau), batch_size
        self.name = f"latte-mix-{latent}-{distance}"

    def _run_posterior(self, batch: TokenBatch, layer: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Posterior outputs on the real tokens ``(N, ...)`` and the ``(B, T)`` bool mask they came from."""
        param = next(self.posterior.parameters(), None)
        device = param.device if param is not None else batch.attention_mask.device
        dtype = param.dtype if param is not None and param.dtype.is_floating_point else torch.float32
        mask = batch.attention_mask.bool()
        feats = batch.hidden_states[layer][mask].to(device=device, dtype=dtype)
        with torch.autocast(device_type=device.type, enabled=False):
            out = self.posterior(feats)
        for key, ndim in OUTPUTS[self.latent].items():
            value = out.get(key) if isinstance(out, dict) else None
            if value is None or value.dim() != ndim or value.shape[0] != feats.shape[0]:
                got = {k: tuple(v.shape) for k, v in out.items()} if isinstance(out, dict) else type(out).__name__
                raise ValueError(f"{self.name}: the posterior must return {key!r} of {ndim} dims with one "
                                 f"row per token ({feats.shape[0]}); got {got}")
        return {k: v.float() for k, v in out.items()}, mask.to(device)

    @staticmethod
    def _scatter(values: torch.Tensor, mask: torch.Tensor, width: int, fill: float = 0.0) -> torch.Tensor:
        """Packed ``(N, ...)`` token rows back to padded ``(B, width, ...)``."""
        out = values.new_full((mask.shape[0], width, *values.shape[1:]), fill)
        out[:, : mask.shape[1]][mask] = values
        return out

    def _pool(self, width: int, layer: int):
        def pool(batch: TokenBatch) -> dict[str, torch.Tensor]:
            out, mask = self._run_posterior(batch, layer)
            if self.latent == "categorical":
                probs = torch.softmax(out["logits"] / self.tau, dim=-1)
                return {"mixture": token_mixture(self._scatter(probs, mask, mask.shape[1]), mask)}
            if self.latent == "ae":
                return {"embedding": token_mixture(self._scatter(out["code"], mask, mask.shape[1]), mask)}
            padded = torch.zeros(mask.shape[0], width, dtype=torch.bool, device=mask.device)
            padded[:, : mask.shape[1]] = mask
            return {"mu": self._scatter(out["mu"], mask, width),
                    "var": self._scatter(out["logvar"].exp(), mask, width, fill=1.0), "mask": padded}

        return pool

    def reading(self) -> Reading:
        """The token states of ``layer`` (``embeddings.scoring.reading``): one pass shared with the poolings."""
        return layer_reading(self.layer, self.encoder.num_layers)

    def represent(self, sentences: Sequence[str]) -> Representation:
        """categorical ``{"mixture": (n, D, K)}``; normal ``{"mu", "var": (n, T, Dz), "mask": (n, T)}``
        (T = the call's longest tokenisation); ae ``{"embedding": (n, Dz)}``."""
        return self._represent(self.encoder, self.layer, sentences)

    def from_layer(self, view: BaseEncoder, sentences: Sequence[str]) -> Representation:
        """``represent`` on the token states ``view`` serves as hidden state -1 (``LayerMemoEncoder``)."""
        return self._represent(view, -1, sentences)

    def _represent(self, encoder: BaseEncoder, layer: int, sentences: Sequence[str]) -> Representation:
        sentences = list(sentences)
        validate_sentences(sentences)
        width = 0
        if self.latent == "normal" and sentences:
            width = max(len(ids) for ids in encoder.tokenize(list(dict.fromkeys(sentences))))
            if self.pad_tokens is not None:
                if width > self.pad_tokens:
                    raise ValueError(f"{self.name}: a sentence has {width} tokens > pad_tokens={self.pad_tokens}")
                width = int(self.pad_tokens)
        was_training = self.posterior.training
        self.posterior.eval()
        try:
            rep = encoder.encode(sentences, self._pool(width, layer), batch_size=self.batch_size, desc=self.name)
        finally:
            self.posterior.train(was_training)
        if "mask" in rep:
            rep["mask"] = rep["mask"].bool()  # ``encode`` hands every output back as float32
        return rep  # type: ignore[return-value]

    def similarity(self, a: Representation, b: Representation) -> torch.Tensor:
        """Row-wise similarity of aligned representations, higher = more similar: the cosine, or -distance for
        ``js`` (-JS divergence in nats, <= 0) and ``l2`` (normal latent: -L2 or -log L2, see
        ``gaussian_mixture_l2``); ``mixture_js_divergence`` / ``mixture_l2_distance`` give the distances."""
        if self.latent == "normal":  # O(n T^2 Dz) in float64: run it where the posterior runs (a GPU)
            param = next(self.posterior.parameters(), None)
            device = param.device if param is not None else a["mu"].device
            args = [rep[k].to(device) for rep in (a, b) for k in ("mu", "var", "mask")]
            fn = gaussian_mixture_l2 if self.distance == "l2" else gaussian_mixture_log_cosine
            return fn(*args).cpu()
        if self.latent == "ae":
            return cosine_rows(a["embedding"], b["embedding"])
        if self.distance == "cosine":
            return mixture_cosine(a["mixture"], b["mixture"])
        distance = {"js": mixture_js_divergence, "l2": mixture_l2_distance}[self.distance]
        return -distance(a["mixture"], b["mixture"])


def load_token_vae_scorer(path: str | os.PathLike, encoder: BaseEncoder | None = None, device: str = "cpu",
                          batch_size: int | None = None, distance: str | None = None,
                          allow_other_encoder: bool = False) -> LatteMixScorer:
    """The scorer of a ``LatteMixModule.export`` directory, on ``encoder`` (``None``: the recorded one)."""
    if encoder is None:
        config = load_export_config(path, EXPORT_FORMAT)
        encoder = load_encoder(config["model_name_or_path"], max_length=config["max_length"],
                               batch_size=batch_size or 64, device=device)
    return LatteMixExportScorer(encoder, str(path), distance=distance, batch_size=batch_size,
                                allow_other_encoder=allow_other_encoder)


class LatteMixExportScorer(LatteMixScorer):
    """Registry entry ``{name: latte_mix, path: <export dir>, distance: cosine|js|l2}`` on the encoder it was fitted
    on; js and l2 score as similarity = -distance (higher = more similar)."""

    def __init__(self, encoder: BaseEncoder, path: str, distance: str | None = None,
                 batch_size: int | None = None, allow_other_encoder: bool = False) -> None:
        posterior, _, config = load_token_vae(path)
        check_fitted_on(config.get("encoder"), encoder, EXPORT_FORMAT.describe(path), allow_other_encoder,
                        width=int(config["input_dim"]))
        super().__init__(encoder, posterior.to(encoder.device), layer=int(config["layer"]), latent=config["latent"],
                         distance=distance or config["distance"], tau=float(config["score_tau"]),
                         batch_size=batch_size)
