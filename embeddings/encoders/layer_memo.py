"""A frozen encoder whose token states of one layer are computed once per sentence and then served from memory.

For sweeps of small heads on one frozen encoder (Latte-Mix). A batch with any unseen sentence runs the wrapped
encoder on the WHOLE batch, so numbers equal an unmemoised pass."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.encoders.token_batch import TokenBatch
from sts_lightning.embeddings.errors import ConfigError

Ids = tuple[int, ...]


class LayerMemo:
    """``token ids -> (states (tokens, hidden), special (tokens,) bool)`` of hidden-state ``layer``, on the CPU, stored
    as ``dtype`` (float16 halves memory; served as float32)."""

    def __init__(self, layer: int, dtype: torch.dtype = torch.float32) -> None:
        self.layer, self.dtype = int(layer), dtype
        self.rows: dict[Ids, tuple[torch.Tensor, torch.Tensor]] = {}

    def __contains__(self, ids: Ids) -> bool:
        return ids in self.rows

    def __len__(self) -> int:
        return len(self.rows)

    def record(self, ids: Sequence[Sequence[int]], batch: TokenBatch) -> None:
        """Keep the real tokens of every row of ``batch`` (run on ``ids``) not yet in the memo."""
        states = batch.hidden_states[self.layer]
        for row, seq in enumerate(ids):
            key = tuple(seq)
            if key not in self.rows:
                n = len(seq)
                self.rows[key] = (states[row, :n].to(self.dtype).cpu(), batch.special_tokens_mask[row, :n].bool().cpu())

    def put(self, ids: Ids, states: torch.Tensor, special: torch.Tensor) -> None:
        """One sentence's states, e.g. read back from disk (kept if already present)."""
        self.rows.setdefault(tuple(ids), (states.to(self.dtype), special.bool()))

    def batch(self, ids: Sequence[Sequence[int]]) -> TokenBatch:
        """A one-layer ``TokenBatch`` of memoised sentences, right-padded with zeros."""
        keys = [tuple(x) for x in ids]
        width = max(len(k) for k in keys)
        hidden = self.rows[keys[0]][0].shape[-1]
        states = torch.zeros(len(keys), width, hidden)
        mask = torch.zeros(len(keys), width, dtype=torch.long)
        special = torch.zeros(len(keys), width, dtype=torch.bool)
        for row, key in enumerate(keys):
            s, sp = self.rows[key]
            states[row, : len(key)] = s.float()
            mask[row, : len(key)] = 1
            special[row, : len(key)] = sp
        return TokenBatch(hidden_states=(states,), attention_mask=mask, special_tokens_mask=special)


def check_layer(encoder: BaseEncoder, layer: int) -> int:
    n = encoder.num_layers
    if not -n <= layer < n:
        raise ConfigError(f"layer {layer} out of range for {encoder.name} ({n} hidden-state tensors: use {-n}..{n - 1})")
    return int(layer)


class _Wrapping(BaseEncoder):
    """Hands on ``encoder``'s tokenizer, width and batching (the same batches as the wrapped encoder's)."""

    def __init__(self, encoder: BaseEncoder) -> None:
        self.encoder, self.name, self.device = encoder, encoder.name, encoder.device
        self.batch_size, self.max_tokens = encoder.batch_size, encoder.max_tokens

    @property
    def packs_batches(self) -> bool:
        return self.encoder.packs_batches

    @property
    def hidden_size(self) -> int:
        return self.encoder.hidden_size

    def tokenize(self, sentences: Sequence[str]) -> list[list[int]]:
        return self.encoder.tokenize(sentences)


class LayerMemoEncoder(_Wrapping):
    """Wraps a frozen ``encoder``; ``forward_ids`` returns ``TokenBatch((layer_states,), mask, special)`` from the memo
    (``memo``: an existing one of that layer, filled by a shared pass or from disk)."""

    def __init__(self, encoder: BaseEncoder, layer: int = -1, dtype: torch.dtype = torch.float32,
                 memo: LayerMemo | None = None) -> None:
        super().__init__(encoder)
        self.layer = check_layer(encoder, layer)
        self.memo = memo if memo is not None else LayerMemo(layer, dtype)
        self.dtype = self.memo.dtype
        self.name = f"{encoder.name}@layer{layer}"

    @property
    def num_layers(self) -> int:
        return 1

    def count_forward(self, n: int) -> None:
        """Served from memory: the wrapped encoder counts the passes that really run (``forward_ids``)."""

    def forward_ids(self, ids: Sequence[Sequence[int]]) -> TokenBatch:
        if any(tuple(x) not in self.memo for x in ids):
            with torch.inference_mode():
                batch = self.encoder.forward_ids(ids)
            self.encoder.count_forward(len(ids))
            self.memo.record(ids, batch)
        return self.memo.batch(ids)


class RecordingEncoder(_Wrapping):
    """Runs ``encoder`` and hands out its full batches, recording the layers of ``memos`` on the way (one pass feeds
    the poolings and the memos Latte-Mix reads afterwards)."""

    def __init__(self, encoder: BaseEncoder, memos: Sequence[LayerMemo]) -> None:
        super().__init__(encoder)
        self.memos = list(memos)

    @property
    def num_layers(self) -> int:
        return self.encoder.num_layers

    def count_forward(self, n: int) -> None:
        self.encoder.count_forward(n)

    def forward_ids(self, ids: Sequence[Sequence[int]]) -> TokenBatch:
        batch = self.encoder.forward_ids(ids)
        for memo in self.memos:
            memo.record(ids, batch)
        return batch
