"""Token-level VAEs on frozen token states: Latte-Mix (categorical), Normal VAE and plain AE (Li et al.).

Every real token's state of a frozen encoder layer is encoded to a latent and decoded back (Eq. 3): loss = ``beta *
KL[q(z|u) || p(z)] - E_q[log p(u|z)]`` per token, ``p(u|z)`` a unit-variance Gaussian. Recipe (Appendix A.4-A.5):
Gumbel-Softmax at tau 0.3, beta annealed from 0 to 1, free bits, Adam, batch 16; the paper's lr "from 2e-5 to 1" is
read as 1 x a base ``lr``, since Adam at lr 1 would diverge. ``scorer()`` works on the live posterior, so the STS
callback, the export and ``evaluate.py`` score the same way.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch
from lightning.pytorch import LightningModule
from torch import Tensor

from sts_lightning.embeddings.encoders.load import encoder_hidden_size
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.export_note import EXPORT, LoadingNote, evaluate_command
from sts_lightning.embeddings.io.model_card import ModelCard, TrainingFacts
from sts_lightning.embeddings.methods.latte_mix.nets import LATTE_MIX, NET_KEYS, build_nets, save_token_vae
from sts_lightning.embeddings.methods.latte_mix.objective import annealed_beta, token_vae_losses
from sts_lightning.embeddings.methods.latte_mix.scorer import LatteMixScorer, check_combination
from sts_lightning.lightning_modules.arg_rules import check_args
from sts_lightning.lightning_modules.base import check_finite
from sts_lightning.lightning_modules.frozen_encoder import FrozenEncoderMixin
from sts_lightning.lightning_modules.optimizers import build_optimizer, known_steps, lr_schedule

log = logging.getLogger(__name__)


class LatteMixModule(FrozenEncoderMixin, LightningModule):
    """A token VAE (``latent``: categorical / normal / ae) over frozen token states.

    The encoder, ``layer`` and ``max_length`` must match the datamodule's. ``latent_dim`` is D (variables or
    dimensions), ``num_classes`` K per variable; ``score_tau`` is the test Gumbel-Softmax temperature (``None``:
    ``tau``); ``kl_threshold`` the free bits per unit.
    """

    feature_keys = ("model_name_or_path", "layer", "max_length")

    def __init__(self, model_name_or_path: str = "all-MiniLM-L6-v2", layer: int = -1, max_length: int | None = None,
                 input_dim: int | None = None, latent: str = "categorical", latent_dim: int = 64,
                 num_classes: int = 100, hidden_dim: int = 512, encoder_layers: int = 1, decoder_layers: int = 3,
                 tau: float = 0.3, score_tau: float | None = None, kl_threshold: float = 0.3,
                 beta_start: float = 0.0, beta_end: float = 1.0, beta_warmup_ratio: float = 0.5,
                 lr: float = 1e-3, min_lr: float = 2e-5, warmup_ratio: float = 0.1, distance: str | None = None,
                 eval_batch_size: int = 64) -> None:
        super().__init__()
        self.save_hyperparameters()
        check_args({"tau": tau, "score_tau": score_tau, "beta_warmup_ratio": beta_warmup_ratio, "lr": lr,
                    "min_lr": min_lr, "warmup_ratio": warmup_ratio, "max_length": max_length,
                    "eval_batch_size": eval_batch_size})
        if min_lr > lr:
            raise ConfigError(f"model.min_lr={min_lr} must be <= model.lr={lr} (the schedule rises from min_lr to lr)")
        if input_dim is None:
            self.hparams.input_dim = encoder_hidden_size(str(model_name_or_path))
        self.posterior, self.decoder = build_nets(self.hparams)

        self.hparams.distance = check_combination(latent, distance)  # fail now, not after an epoch
        self._encoder = None

    # ------------------------------------------------------------------------------ the objective
    def beta(self) -> float:
        hp = self.hparams
        total = self.trainer.estimated_stepping_batches if self._trainer is not None else 0
        return annealed_beta(self.global_step, total, hp.beta_start, hp.beta_end, hp.beta_warmup_ratio)

    def losses(self, features: Tensor, mask: Tensor) -> dict[str, Tensor]:
        """The objective's terms and diagnostics on a batch (``embeddings.methods.latte_mix.objective``)."""
        hp = self.hparams
        return token_vae_losses(self.posterior, self.decoder, features, mask, hp.latent, hp.tau, hp.kl_threshold,
                                self.beta())

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        terms = self.losses(batch["features"], batch["mask"])
        loss = terms["loss"]
        check_finite(loss, self.global_step)
        n = int(batch["mask"].sum())
        for name, value in terms.items():
            value = torch.as_tensor(value, dtype=torch.float32)
            self.log(f"train/{name}", value, prog_bar=name == "loss", batch_size=n)
        return loss

    def configure_optimizers(self):
        """Adam (not AdamW: no decay) and the ``triangle`` schedule, from the shared factories."""
        hp = self.hparams
        optimizer = build_optimizer("adam", self.parameters(), hp.lr)
        schedule = lr_schedule(optimizer, "triangle", hp.lr, known_steps(self.trainer), hp.warmup_ratio,
                               final_lr=hp.min_lr)
        return {"optimizer": optimizer, "lr_scheduler": schedule}

    # ------------------------------------------------------------------------------- scoring
    def scorer(self):
        """The mixture scorer on the live posterior (the STS callback switches eval mode)."""

        hp = self.hparams
        encoder = self.frozen_encoder()
        world = self.trainer.world_size if self._trainer is not None else 1
        # DDP all-gathers the per-rank shards: the normal latent's padded token axis must agree
        pad = getattr(encoder, "max_length", None) if hp.latent == "normal" and world > 1 else None
        return LatteMixScorer(encoder, self.posterior, layer=hp.layer, latent=hp.latent, distance=hp.distance,
                              tau=hp.score_tau or hp.tau, batch_size=hp.eval_batch_size, pad_tokens=pad)

    def export(self, path: str | os.PathLike, training: TrainingFacts | None = None) -> Path:
        """Posterior and decoder weights, the encoder reference, ``LOADING.md`` and the model card."""
        hp = self.hparams
        config = {k: hp[k] for k in (*NET_KEYS, "layer", "max_length", "tau", "distance")}
        config["model_name_or_path"] = str(hp.model_name_or_path)
        config["score_tau"] = hp.score_tau or hp.tau
        config["encoder"] = self.fitted_on()  # what makes the export refuse any other encoder
        note = LoadingNote(f"Token VAE ({hp.latent} latent) on the frozen `{config['model_name_or_path']}` "
                           f"(hidden state {hp.layer}): a sentence is represented through its tokens' VAE posteriors.",
                           evaluate_command([config["model_name_or_path"]], f"{{name:latte_mix,path:{EXPORT}}}",
                                            hp.max_length),
                           "the per-token VAE posterior has no sentence-transformers module")
        card = ModelCard(LATTE_MIX, (config["model_name_or_path"],), note, training)
        target = save_token_vae(path, self.posterior, self.decoder, config, card)
        log.info("exported token VAE to %s", target)
        return target
