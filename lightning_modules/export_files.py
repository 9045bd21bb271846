"""``EncoderExport``: what ``EncoderModule.export`` writes: the Hugging Face model, its tokenizer, the
sentence-transformers files where they reproduce our vectors, ``LOADING.md`` and the model card; a method
overrides its hooks (``export_model``, ``export_head``, ``write_export_files``, ``loading_note``, ``base_models``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import ClassVar

import torch

from sts_lightning.embeddings.io.disk_full import payload_bytes
from sts_lightning.embeddings.io.export_manifest import export_directory
from sts_lightning.embeddings.io.export_note import (
    EXPORT,
    NOTE_FILE,
    LoadingNote,
    evaluate_command,
    loads_as_cross_encoder,
    with_dims,
)
from sts_lightning.embeddings.io.model_card import MethodInfo, ModelCard, TrainingFacts
from sts_lightning.embeddings.io.st_export import write_sentence_transformers_files

log = logging.getLogger(__name__)


class EncoderExport:
    """Mixin: the export of an ``EncoderModule`` (see the module docstring)."""

    # What the export's model card names (README.md); every trained method sets its own.
    method_info: ClassVar[MethodInfo] = MethodInfo("encoder", "Fine-tuned encoder")

    def export_model(self) -> torch.nn.Module:
        """The Hugging Face model ``export`` saves with ``save_pretrained`` (the encoder, or encoder and head)."""
        return self.encoder_model

    def base_models(self) -> tuple[str, ...]:
        """What the model card names as the model training started from."""
        return (str(self.hparams.model_name_or_path),)

    def export_head(self) -> torch.nn.Linear | None:
        """A ``Linear`` (then ``tanh``) after pooling, exported as a sentence-transformers ``Dense``."""
        return None

    def write_export_files(self, folder: Path) -> str | None:
        """The sentence-transformers files of the pooling; ``None`` if written, else why there are none."""
        return write_sentence_transformers_files(folder, self.hparams.pooling, self.embedding_dim,
                                                 int(self.encoder_model.config.num_hidden_layers),
                                                 self.encoder.max_length, dense=self.export_head())

    def loading_note(self, why_not: str | None) -> LoadingNote:
        """``LOADING.md`` / the card's loading section; ``why_not``: why there are no sentence-transformers files."""
        pooling = self.hparams.pooling
        return LoadingNote(f"{type(self).__name__}: a Hugging Face encoder (`AutoModel.from_pretrained`), "
                           f"sentence vector = `{pooling}` pooling, compared by cosine.",
                           evaluate_command([EXPORT], pooling), why_not)

    def export(self, path: str | os.PathLike, training: TrainingFacts | None = None) -> Path:
        """Write (atomically, with a checksum manifest) a directory for ``AutoModel.from_pretrained`` and, where it
        reproduces our pooling, ``SentenceTransformer``, plus ``LOADING.md`` and the card ``README.md``, written last
        so no other writer replaces it."""
        target = Path(path)
        with export_directory(target, needed=payload_bytes(self.export_model().state_dict())) as tmp:
            self.export_model().save_pretrained(tmp)
            # the tokenizer as every encoding leaves it (truncation at max_length, no padding), so its files are the
            # same whether or not this process encoded before exporting (a resumed run that only exports)
            self.encoder.tokenize(["."])
            self.encoder.tokenizer.save_pretrained(tmp)
            why_not = self.write_export_files(tmp)
            if why_not is not None and not loads_as_cross_encoder(why_not):  # a CrossEncoder loads as evaluated
                log.warning("%s: SentenceTransformer(path) alone does not give its vectors (%s); load it with the "
                            "evaluate.py line of its %s", target, why_not, NOTE_FILE)
            note = self.loading_note(why_not)
            if self.matryoshka:  # the prefixes trained: the note and the card say so, and how to score them
                note = with_dims(note, self.matryoshka[0], self.embedding_dim)
            ModelCard(self.method_info, self.base_models(), note, training).write(tmp, shown_as=target)
        log.info("exported %s", target)
        return target
