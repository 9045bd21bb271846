"""``SentenceTransformer(<promptbert export>, trust_remote_code=True)``: PromptBERT's evaluated vector, not mean pooling.

No sentence-transformers pooling computes a template's [MASK] state, so ``PromptBERTEmbedding`` computes what
``PromptScorer`` does from the same functions; only sentence-transformers imports this file.
"""

from __future__ import annotations

from typing import Any

import torch
from sentence_transformers.base.modules.input_module import InputModule
from transformers import AutoModel, AutoTokenizer

from sts_lightning.embeddings.io.export_dir import load_export_config
from sts_lightning.embeddings.methods.promptbert.head import EXPORT_FORMAT, load_head, write_prompt_export
from sts_lightning.embeddings.methods.promptbert.scorer import TemplateDenoiser
from sts_lightning.embeddings.methods.promptbert.template import Template, eval_ids, mask_slot


class PromptBERTEmbedding(InputModule):
    """The whole PromptBERT pipeline as one sentence-transformers input module (``model_name_or_path``: an export)."""

    save_in_root = True

    def __init__(self, model_name_or_path: str) -> None:
        super().__init__()
        config = load_export_config(model_name_or_path, EXPORT_FORMAT)
        self.auto_model = AutoModel.from_pretrained(model_name_or_path)
        self.tokenizer = AutoTokenizer.from_pretrained(model_name_or_path)
        self.template = Template(str(config["template"]), f"{EXPORT_FORMAT.describe(model_name_or_path)}: template")
        self.max_seq_length = config.get("max_length")  # the sentence's own tokens; the template comes on top
        self.slot = mask_slot(self.tokenizer, self.template)
        self.head = load_head(model_name_or_path) if config.get("head") is not None else None
        self.denoiser = TemplateDenoiser(self.tokenizer, self.auto_model, self.template) if config["denoise"] else None

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token: bool | str | None = None,
             cache_folder: str | None = None, revision: str | None = None, local_files_only: bool = False,
             **_: Any) -> PromptBERTEmbedding:
        """sentence-transformers' loader entry point (a local export, or a hub repo it downloads first)."""
        folder = cls.load_dir_path(model_name_or_path, subfolder=subfolder, token=token, cache_folder=cache_folder,
                                   revision=revision, local_files_only=local_files_only)
        return cls(str(folder))

    def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, torch.Tensor]:
        """The evaluation's ids (``eval_ids``), right-padded, and each sentence's token count."""
        texts = [(prompt or "") + str(text) for text in inputs]
        ids, lengths = eval_ids(self.tokenizer, self.template, texts, self.max_seq_length)
        width = max(len(row) for row in ids)
        pad = self.tokenizer.pad_token_id or 0
        input_ids = torch.tensor([row + [pad] * (width - len(row)) for row in ids], dtype=torch.long)
        mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in ids], dtype=torch.long)
        return {"input_ids": input_ids, "attention_mask": mask, "prompt_lengths": torch.tensor(lengths)}

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        out = self.auto_model(input_ids=features["input_ids"], attention_mask=features["attention_mask"],
                              return_dict=True).last_hidden_state
        rows = torch.arange(out.shape[0], device=out.device)
        index = torch.full_like(rows, self.slot) if self.slot >= 0 else \
            features["attention_mask"].sum(dim=1).to(out.device) + self.slot
        vectors = self._head(out[rows, index])
        if self.denoiser is not None:
            noise = self.denoiser(features["prompt_lengths"].tolist()).to(out.device, out.dtype)
            vectors = vectors - self._head(noise)
        features["token_embeddings"] = out
        features["sentence_embedding"] = vectors
        return features

    def _head(self, states: torch.Tensor) -> torch.Tensor:
        return states if self.head is None else self.head(states)

    def get_embedding_dimension(self) -> int:
        return int(self.auto_model.config.hidden_size)

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        """What the export holds: the encoder, its tokenizer, ``promptbert_config.json`` (and the head)."""
        self.auto_model.save_pretrained(output_path, safe_serialization=safe_serialization)
        self.tokenizer.save_pretrained(output_path)
        write_prompt_export(output_path, {"template": self.template.text, "denoise": self.denoiser is not None,
                                          "max_length": self.max_seq_length}, self.head)
