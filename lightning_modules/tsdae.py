"""TSDAE (Wang, Reimers & Gurevych, Findings of EMNLP 2021): a sentence vector trained to be decodable.

Each step deletes words of every sentence (``embeddings.methods.tsdae.objective``), embeds the NOISY sentence and
lets a decoder reconstruct the ORIGINAL one while cross-attending to nothing but that vector. The decoder shares
the encoder's parameters (``tie_decoder=true``, the paper's default); only the encoder and its pooling are exported.
Recipe defaults: paper Sec. 4 / sentence-transformers' ``train_tsdae_from_file.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from sts_lightning.embeddings.encoders.packaged import resolve_model_path
from sts_lightning.embeddings.io.export_note import LoadingNote
from sts_lightning.embeddings.methods.tsdae import METHOD
from sts_lightning.embeddings.methods.tsdae.decoder import build_decoder, parameter_aliases
from sts_lightning.embeddings.methods.tsdae.objective import add_noise, decoder_loss, noise_rng
from sts_lightning.lightning_modules.activation_checkpointing import enable_gradient_checkpointing
from sts_lightning.lightning_modules.arg_rules import PROBABILITY, check_value
from sts_lightning.lightning_modules.base import EncoderModule


class TSDAEModule(EncoderModule):
    """TSDAE on plain sentences; the deletion noise is drawn per ``(seed, rank, step)``: resumes are bit-identical."""

    text_fields = ("sentences",)  # the decoder's targets, tokenized in the DataLoader's workers

    def __init__(self, model_name_or_path: str = "paraphrase-MiniLM-L3-v2", *, deletion_ratio: float = 0.6,
                 tie_decoder: bool = True, seed: int = 0, pooling: str = "cls",
                 lr: float = 3e-5, weight_decay: float = 0.0, warmup_ratio: float = 0.0,
                 scheduler: str = "constant", **base) -> None:
        check_value("model.deletion_ratio", deletion_ratio, PROBABILITY)
        super().__init__(model_name_or_path, pooling=pooling, lr=lr,
                         weight_decay=weight_decay, warmup_ratio=warmup_ratio, scheduler=scheduler, **base)
        self.method_info = METHOD.card()
        self.decoder = build_decoder(resolve_model_path(str(model_name_or_path)), self.encoder_model,
                                     tie=bool(tie_decoder), name=str(model_name_or_path))
        self.decoder.train()
        if self.hparams.gradient_checkpointing:
            enable_gradient_checkpointing(self.decoder)
        self._aliases = parameter_aliases(self)
        self._register_state_dict_hook(_drop_aliases)
        self.register_load_state_dict_post_hook(_aliases_are_loaded)

    # ------------------------------------------------------------------------------------ training
    def noisy(self, sentences: Sequence[str]) -> list[str]:
        """This rank's deletion noise of this step (a pure function of seed, rank, step and the sentences)."""
        hp = self.hparams
        return add_noise(sentences, noise_rng(hp.seed, self.global_rank, self.global_step), hp.deletion_ratio)

    def loss(self, noisy: Sequence[str], originals: Sequence[str]) -> Tensor:
        """TSDAE's loss of one batch: encode ``noisy``, decode ``originals`` from the pooled vectors."""
        return self.loss_ids(self.tokenize(noisy), self.tokenize(originals))

    def loss_ids(self, noisy: Sequence[Sequence[int]], originals: Sequence[Sequence[int]]) -> Tensor:
        """``loss`` of tokenized sentences."""
        vectors = self.embed_ids(noisy)
        target_ids, target_mask = self._live_encoder().pad(originals)
        return decoder_loss(self.decoder, vectors, target_ids.to(self.device), target_mask.to(self.device))

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        originals = list(batch["sentences"])
        # The targets come tokenized from the loader's workers; the noisy input is drawn per step (seed, rank,
        # step) and so is tokenized here: the one tokenizer call left in a training step (docs/training.md).
        noisy = self.tokenize(self.noisy(originals))
        loss = self.loss_ids(noisy, self.batch_ids(batch, "sentences"))
        self.log("train/loss", loss, prog_bar=True, batch_size=len(originals))
        return loss

    # -------------------------------------------------------------------------------------- export
    def loading_note(self, why_not: str | None) -> LoadingNote:
        note = super().loading_note(why_not)
        return LoadingNote(note.what + " TSDAE's decoder was used in training only (as in sentence-transformers) "
                           "and is not part of the export.", note.command, why_not)


def _drop_aliases(module: TSDAEModule, state_dict: dict, prefix: str, local_metadata) -> None:
    """State-dict hook: one entry per tensor (the decoder's tied parameters are the encoder's)."""
    for alias in module._aliases:
        state_dict.pop(prefix + alias, None)


def _aliases_are_loaded(module: TSDAEModule, incompatible) -> None:
    """Load hook: a tied alias is filled by its original's entry (the same tensor), so it is not missing."""
    names = set(module._aliases)
    incompatible.missing_keys[:] = [k for k in incompatible.missing_keys if k not in names]
