"""Any ``Scorer`` as an ``mteb`` 2.x model: ``encode`` packs the representation into one row per sentence and
``similarity_pairwise`` unpacks it for ``scorer.similarity``, so mteb's ``spearman`` is ``evaluate.py``'s number for
every scorer (its ``cosine_spearman`` only for cosine scorers). mteb is imported only where its types are needed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.scoring.scorer import Representation, Scorer, VectorScorer, take

MTEB_PIN = "mteb==2.26.24"


def require_mteb() -> Any:
    """The ``mteb`` module, or one line saying how to install the version this adapter was written for."""
    try:
        import mteb
    except ImportError as err:
        raise ConfigError(f"mteb is not installed: pip install {MTEB_PIN} (or pip install -e '.[test]')") from err
    return mteb


def scores_by_cosine(scorer: Scorer) -> bool:
    """True when the scorer's similarity is the cosine of one vector (then mteb's main score is ours too)."""
    inner = getattr(scorer, "inner", None)  # wrappers (PrecomputedScorer, a meta export of one source)
    if isinstance(inner, Scorer) and type(scorer).similarity is not VectorScorer.similarity:
        return scores_by_cosine(inner)
    return isinstance(scorer, VectorScorer) and type(scorer).similarity is VectorScorer.similarity


@dataclass(frozen=True)
class Field:
    """One tensor of a representation inside a packed row: its key, per-sentence shape and dtype."""

    key: str
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def width(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


def layout_of(rep: Representation) -> tuple[Field, ...]:
    """The packing layout of a representation (keys in sorted order, so it does not depend on dict order)."""
    return tuple(Field(k, tuple(rep[k].shape[1:]), rep[k].dtype) for k in sorted(rep))


def _pack_dtype(layout: Sequence[Field]) -> torch.dtype:
    """float64 if any field is float64, else float32: both hold every field's values exactly (bool as 0 / 1)."""
    return torch.float64 if any(f.dtype == torch.float64 for f in layout) else torch.float32


def pack(rep: Representation, layout: Sequence[Field]) -> np.ndarray:
    """``(n, sum of widths)`` array: every field flattened per sentence, concatenated in layout order."""
    dtype = _pack_dtype(layout)
    n = next(iter(rep.values())).shape[0]
    parts = [rep[f.key].detach().to("cpu", dtype).reshape(n, f.width) for f in layout]
    return torch.cat(parts, dim=1).numpy()


def unpack(array: Any, layout: Sequence[Field]) -> Representation:
    """Inverse of ``pack``: the representation, each field back in its own shape and dtype."""
    x = torch.as_tensor(np.asarray(array))
    if x.dim() == 1:
        x = x.unsqueeze(0)
    width = sum(f.width for f in layout)
    if x.shape[1] != width:
        raise ValueError(f"packed rows have {x.shape[1]} columns; this scorer's layout has {width}")
    rep: Representation = {}
    start = 0
    for f in layout:
        rep[f.key] = x[:, start:start + f.width].reshape(x.shape[0], *f.shape).to(f.dtype)
        start += f.width
    return rep


def batch_texts(inputs: Any) -> list[str]:
    """The sentences of an mteb ``DataLoader[BatchedInput]`` (batches with a ``text`` column) or a plain list."""
    if isinstance(inputs, str):
        return [inputs]
    texts: list[str] = []
    for item in inputs:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, dict) and "text" in item:
            texts.extend(str(t) for t in item["text"])
        else:
            raise TypeError(f"encode expects text batches (dicts with a 'text' column); got {type(item).__name__}")
    return texts


def model_name(encoder_name: str, scorer_label: str) -> str:
    """An mteb-style ``org/name`` (mteb files results under it): ``sts-lightning/<encoder>__<scorer>``."""
    tail = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{encoder_name.rstrip('/').split('/')[-1]}__{scorer_label}")
    return f"sts-lightning/{tail}"


class MTEBScorerModel:
    """A ``Scorer`` speaking mteb 2.x's ``EncoderProtocol``; ``name``: what mteb files results under, ``revision``: a
    free label for its result cache."""

    def __init__(self, scorer: Scorer, name: str | None = None, revision: str = "local") -> None:
        self.scorer = scorer
        self.name = name or model_name("model", scorer.name)
        self.revision = revision
        self.by_cosine = scores_by_cosine(scorer)
        self._rows: dict[str, int] = {}
        self._rep: Representation | None = None
        self._layout: tuple[Field, ...] | None = None

    # -- our side ---------------------------------------------------------------------------------------
    def prepare(self, sentences: Iterable[str]) -> None:
        """Represent every not-yet-seen distinct sentence in ONE ``represent`` call."""
        new = [s for s in dict.fromkeys(sentences) if s not in self._rows]
        if not new:
            return
        rep = self.scorer.represent(new)
        layout = layout_of(rep)
        if self._rep is None:
            self._rep, self._layout = rep, layout
        elif layout != self._layout:
            raise ValueError(f"{self.scorer.name}: representations of two calls differ in shape "
                             f"({self._layout} vs {layout}); call prepare() once with every sentence of the task")
        else:
            self._rep = {k: torch.cat([self._rep[k], rep[k]]) for k in self._rep}
        start = len(self._rows)
        self._rows.update({s: start + i for i, s in enumerate(new)})

    @property
    def num_prepared(self) -> int:
        """How many distinct sentences have a representation ready."""
        return len(self._rows)

    def reset(self) -> None:
        """Forget prepared representations (before another task whose call-dependent scorer needs its own)."""
        self._rows, self._rep, self._layout = {}, None, None

    def _unpack(self, array: Any) -> Representation:
        if self._layout is None:
            raise ValueError("similarity before any encode: this model has no representation layout yet")
        return unpack(array, self._layout)

    # -- mteb's EncoderProtocol ---------------------------------------------------------------------------
    def encode(self, inputs: Any, *, task_metadata: Any = None, hf_split: str | None = None,
               hf_subset: str | None = None, prompt_type: Any = None, **kwargs: Any) -> np.ndarray:
        """Packed representation rows in input order, prepared on the spot if needed; prompts are ignored (none of
        our scorers uses instructions)."""
        sentences = batch_texts(inputs)
        self.prepare(sentences)
        if not sentences:
            return np.zeros((0, sum(f.width for f in self._layout or ())), dtype=np.float32)
        rows = torch.tensor([self._rows[s] for s in sentences], dtype=torch.long)
        return pack(take(self._rep, rows), self._layout)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> torch.Tensor:
        """``scorer.similarity`` of aligned rows: the score mteb reports as ``spearman`` / ``pearson``."""
        return self.scorer.similarity(self._unpack(embeddings1), self._unpack(embeddings2)).float().cpu()

    def similarity(self, embeddings1: Any, embeddings2: Any) -> torch.Tensor:
        """All-pairs matrix ``(n1, n2)`` of ``scorer.similarity`` (retrieval-type tasks), one row at a time."""
        a, b = self._unpack(embeddings1), self._unpack(embeddings2)
        n2 = next(iter(b.values())).shape[0]
        rows = [self.scorer.similarity(take(a, torch.full((n2,), i, dtype=torch.long)), b).float().cpu()
                for i in range(next(iter(a.values())).shape[0])]
        return torch.stack(rows) if rows else torch.zeros(0, n2)

    @property
    def mteb_model_meta(self) -> Any:
        """mteb's ``ModelMeta`` naming this encoder + scorer; the similarity is the scorer's own."""
        require_mteb()  # one clear line when absent (mteb reads this property through hasattr, hiding errors)
        from mteb.models import ModelMeta

        return ModelMeta.create_empty(overwrites={"name": self.name, "revision": self.revision,
                                                 "framework": ["PyTorch"]})
