"""A frozen encoder held by reference, loaded once for scoring: shared by the modules that train a head.

Registering the encoder would put unchanging weights into every checkpoint, so the module keeps plain-scalar
references in its hyper-parameters and loads the encoder lazily, outside the state dict.
"""

from __future__ import annotations

import torch

from sts_lightning.embeddings.compat import attached_trainer
from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.encoder_identity import encoder_identity

ENCODER_KEYS = ("model_name_or_path", "pooling", "max_length")  # the pooled-vector modules' (flow, whitening)


class FrozenEncoderMixin:
    """Adds ``frozen_encoder()`` and the feature-key check (the encoder's arguments: ``_frozen_encoder_spec``)."""

    _encoder: BaseEncoder | None = None

    # hyper-parameters that must equal the datamodule's attributes of the same name (see on_fit_start)
    feature_keys: tuple[str, ...] = ("model_name_or_path", "max_length")

    def _frozen_encoder_spec(self) -> tuple[str, int | None, int]:
        hp = self.hparams
        return str(hp.model_name_or_path), hp.max_length, hp.eval_batch_size

    def on_fit_start(self) -> None:
        """Refuse features cached for another encoder setting: the head would fit inputs it never scores."""
        datamodule = getattr(self.trainer, "datamodule", None)
        wrong = [f"{k}: model {self.hparams[k]!r} vs data {getattr(datamodule, k)!r}" for k in self.feature_keys
                 if hasattr(datamodule, k) and str(getattr(datamodule, k)) != str(self.hparams[k])]
        if wrong:
            raise ConfigError("the cached features come from another encoder setting: " + "; ".join(wrong))

    def validation_step(self, batch, batch_idx: int) -> None:
        """Nothing per batch: the STS callback scores ``scorer()`` once at the end of the loop."""
        return None

    def frozen_encoder(self) -> BaseEncoder:
        """The encoder, loaded once (eval mode, no gradients) and kept on this module's device."""
        if self._encoder is None:

            name, max_length, batch_size = self._frozen_encoder_spec()
            self._encoder = load_encoder(name, max_length=max_length, batch_size=batch_size, device=str(self.device))
            model = getattr(self._encoder, "model", None)
            if isinstance(model, torch.nn.Module):
                model.eval().requires_grad_(False)
        encoder = self._encoder
        if torch.device(encoder.device) != self.device:
            model = getattr(encoder, "model", None)
            if isinstance(model, torch.nn.Module):
                model.to(self.device)
            if hasattr(encoder, "vectors"):
                encoder.vectors = encoder.vectors.to(self.device)
            encoder.device = self.device
        return encoder

    def fitted_on(self) -> dict:
        """The frozen encoder's identity and the precision the training features were cached in (the datamodule's
        ``encode_precision``, maybe bf16, while ``frozen_encoder()`` loads fp32)."""
        trainer = attached_trainer(self)
        precision = getattr(getattr(trainer, "datamodule", None), "encode_precision", None)
        return encoder_identity(self.frozen_encoder(), str(self.hparams.model_name_or_path), precision=precision)
