"""Hugging Face transformer encoder: hub name, local directory, or packaged short name."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from sts_lightning.embeddings.encoders.backbone_names import packaged_hint
from sts_lightning.embeddings.encoders.base import BaseEncoder, pad_ids
from sts_lightning.embeddings.encoders.packaged import resolve_model_path
from sts_lightning.embeddings.encoders.packing import pack_ids, packed_forward, packing_unsupported, to_device
from sts_lightning.embeddings.encoders.precision import dtype_of, resolve_precision
from sts_lightning.embeddings.encoders.token_batch import TokenBatch, unpack_layers
from sts_lightning.embeddings.encoders.token_budget import check_batching
from sts_lightning.embeddings.errors import ConfigError, DataError, first_line
from sts_lightning.embeddings.io.export_manifest import verify_export
from sts_lightning.embeddings.isolated_rng import rng_isolated

DEFAULT_MAX_LENGTH = 256
PACKING_MODES = ("auto", "packed", "padded")
# Where ``packing: auto`` packs in training mode too; on the CPU it packs inference passes only (docs/speed.md).
AUTO_PACKS_ON = ("cuda",)


def sentence_transformers_max_length(path: Path) -> int | None:
    """``max_seq_length`` of a sentence-transformers directory, so we truncate exactly as it does."""
    cfg = path / "sentence_bert_config.json"
    if cfg.is_file():
        return json.loads(cfg.read_text()).get("max_seq_length")
    return None


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


class HFEncoder(BaseEncoder):
    """A transformer returning every layer's token states (fp32 whatever the weights' ``precision``; ``max_length``
    counts special tokens); ``packing``: ``auto`` (packed on CUDA, on the CPU for inference only), ``packed`` or
    ``padded``."""

    def __init__(self, model, tokenizer, max_length: int = DEFAULT_MAX_LENGTH, batch_size: int | None = 64,
                 device: str | torch.device | None = "cpu", name: str = "hf-encoder", precision: str = "fp32",
                 max_tokens: int | None = None, packing: str = "auto") -> None:
        check_batching(batch_size, max_tokens)
        if packing not in PACKING_MODES:
            raise ConfigError(f"encoder.packing={packing!r}: use one of {', '.join(PACKING_MODES)}")
        self.device = resolve_device(device)
        self.precision = resolve_precision(precision, self.device)
        self.model = model.to(self.device, dtype_of(self.precision)).eval()
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.batch_size, self.max_tokens = batch_size, max_tokens
        why_not = packing_unsupported(self.model)
        if packing == "packed" and why_not:
            raise ConfigError(f"encoder.packing=packed: {name} cannot run packed: {why_not}; use packing=padded")
        self.packing = packing
        self.name = name
        # Only sentence-boundary tokens count as special: [UNK] / [MASK] stand for real words.
        boundary = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.bos_token_id,
                    tokenizer.eos_token_id, tokenizer.pad_token_id}
        self._special_ids = torch.tensor(sorted(i for i in boundary if i is not None), dtype=torch.long)
        self._special_on_device = self._special_ids
        self._pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    @classmethod
    @rng_isolated  # a head the checkpoint lacks is initialised randomly: not from the run's generator
    def from_pretrained(cls, name_or_path: str, max_length: int | None = None, **kwargs) -> HFEncoder:
        """Load from a packaged short name (offline), a local directory, or a hub name (online)."""
        from safetensors import SafetensorError
        from transformers import AutoModel, AutoTokenizer

        path = resolve_model_path(name_or_path)
        local = Path(path)
        if local.is_dir():
            verify_export(local)  # an export of ours: every file as written (a plain HF directory: no manifest)
        if max_length is None:
            max_length = (sentence_transformers_max_length(local) if local.is_dir() else None) or DEFAULT_MAX_LENGTH
        try:
            tokenizer = AutoTokenizer.from_pretrained(path)
            model = AutoModel.from_pretrained(path)
        except SafetensorError as err:  # damaged weights in a directory without a manifest
            raise DataError(f"{path}: unreadable model weights ({err}); the model directory is damaged") from None
        except OSError as err:
            raise ConfigError(
                f"could not load model {name_or_path!r} (resolved to {path!r}): not a packaged short name, "
                f"not a local directory with a Hugging Face model, and the hub is unreachable or has no such "
                f"model; {packaged_hint(str(name_or_path))}. Underlying error: {first_line(err)}"
            ) from err
        kwargs.setdefault("name", Path(str(name_or_path)).name)
        return cls(model, tokenizer, max_length=max_length, **kwargs)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers) + 1

    def tokenize(self, sentences: Sequence[str]) -> list[list[int]]:
        out = self.tokenizer(list(sentences), truncation=True, max_length=self.max_length,
                             add_special_tokens=True, return_attention_mask=False,
                             return_token_type_ids=False)
        return out["input_ids"]

    def pad(self, ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-pad to the longest sequence of this batch (dynamic padding)."""
        return pad_ids(ids, self._pad_id)

    @property
    def packs_batches(self) -> bool:
        """Whether the next ``forward_ids`` runs packed (not inside Sen2Pro's fast MC dropout)."""
        if self.packing == "padded" or (self.packing == "auto" and self.device.type not in AUTO_PACKS_ON
                                         and (self.model.training or torch.is_grad_enabled())):
            return False
        if getattr(self.model, "is_gradient_checkpointing", False) and torch.is_grad_enabled():
            # the backward pass recomputes each layer outside ``packed_forward``'s block: only a padded pass reproduces
            return False
        return packing_unsupported(self.model) is None

    def _special_ids_on(self, device: torch.device) -> torch.Tensor:
        """The boundary-token ids on ``device``, copied once per device, not per batch."""
        if self._special_on_device.device != device:
            self._special_on_device = self._special_ids.to(device)
        return self._special_on_device

    def forward_ids(self, ids: Sequence[Sequence[int]]) -> TokenBatch:
        """All-layer token states of one batch, padded or packed (``packs_batches``); gradients flow if enabled."""
        if self.packs_batches:
            return self._forward_packed(ids)
        input_ids, mask = self.pad(ids)
        input_ids, mask = to_device(input_ids, self.device), to_device(mask, self.device)
        out = self.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True, return_dict=True)
        special = torch.isin(input_ids, self._special_ids_on(input_ids.device)) & mask.bool()
        states = tuple(out.hidden_states) if self.precision == "fp32" else tuple(h.float() for h in out.hidden_states)
        return TokenBatch(hidden_states=states, attention_mask=mask, special_tokens_mask=special)

    def _forward_packed(self, ids: Sequence[Sequence[int]]) -> TokenBatch:
        input_ids, positions, layout = pack_ids(ids, self.device)
        with packed_forward(self.model, layout):
            out = self.model(input_ids=input_ids, position_ids=positions, output_hidden_states=True, return_dict=True)
        rows, longest = len(layout.lengths), layout.longest
        special = torch.zeros(rows * longest, dtype=torch.bool, device=self.device)
        special = special.index_copy(0, layout.flat, torch.isin(input_ids[0], self._special_ids_on(input_ids.device)))
        return TokenBatch(hidden_states=unpack_layers(out.hidden_states, layout.flat, rows, longest),
                          attention_mask=layout.attention_mask, special_tokens_mask=special.view(rows, longest))

    @contextlib.contextmanager
    def stochastic(self) -> Iterator[None]:
        """MC dropout: dropout layers active, everything else as at inference."""
        self.model.train()
        try:
            yield
        finally:
            self.model.eval()
