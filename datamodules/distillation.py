"""Sentences paired with the MEAN embedding of N frozen teachers: the training data of SED (Eq. 1).

``prepare_data`` (once per node) computes the teachers' vectors once (``embeddings.sources.cache``) and writes the
mean as one float32 ``.npy`` that ``setup`` maps on every rank. Teachers of different sizes need ``align_to``: each
is mapped onto the student's space first (:func:`map_onto`). ``combine="each"`` keeps every teacher's own vectors
side by side instead (RankCSE); batches then carry ``"teachers"``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, ListConfig, OmegaConf
from torch.utils.data import DataLoader, Dataset

from sts_lightning.datamodules.cached_embeddings import model_fingerprint
from sts_lightning.datamodules.loader import ResumableDataModule
from sts_lightning.datamodules.sentence_files import SentenceIndex, mean_chars, source_paths
from sts_lightning.embeddings.console import phase
from sts_lightning.embeddings.errors import ConfigError, DataError, unknown_choice
from sts_lightning.embeddings.io.cache_root import cache_dir_or_root
from sts_lightning.embeddings.io.npy_cache import inspect_npy_cache, key_digest, save_npy_cache
from sts_lightning.embeddings.methods.meta.projections import orthogonal_procrustes
from sts_lightning.embeddings.sources.build import build_source
from sts_lightning.embeddings.sources.cache import cached_source_vectors, pending_sources, sentences_digest
from sts_lightning.embeddings.sources.names import spec_model, spec_source_name
from sts_lightning.embeddings.stop_request import check_stop, stretch

log = logging.getLogger(__name__)
CACHE_VERSION = 1
COMBINE = ("mean", "each")  # SED's mean target | every teacher's own vectors (RankCSE)


def _plain_spec(spec: Any) -> str | dict:
    """A teacher spec as str / plain dict (Hydra hands over DictConfig), so it hashes and pickles."""
    if isinstance(spec, (DictConfig, ListConfig)):
        spec = OmegaConf.to_container(spec, resolve=True)
    return {str(k): v for k, v in spec.items()} if isinstance(spec, Mapping) else str(spec)



def map_onto(vectors: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``vectors`` (n, d) mapped onto ``reference``'s (n, d_ref) space, rows the same sentences: Orthogonal
    Procrustes (and one scale) between the centred spaces, ``(x - mean(x)) @ R * s + mean(ref)``."""
    x, y = torch.from_numpy(np.asarray(vectors, np.float64)), torch.from_numpy(np.asarray(reference, np.float64))
    x_mean, y_mean = x.mean(0), y.mean(0)
    rotation, scale = orthogonal_procrustes(x - x_mean, y - y_mean)
    return ((x - x_mean) @ rotation * scale + y_mean).numpy()


def mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Mean row-wise cosine: how far the student's start is from its target (logged, kept in the sidecar)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    norms = np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    return float(((a * b).sum(1) / norms).mean())


class DistillationDataset(Dataset):
    """Row ``i``: (sentence ``i``, mean teacher vector ``i``); sentences are read from disk on demand."""

    def __init__(self, index: SentenceIndex, targets: torch.Tensor) -> None:
        if len(index) != len(targets):
            raise DataError(f"{len(index)} sentences but {len(targets)} target vectors: run prepare_data again")
        self.index, self.targets = index, targets

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> tuple[str, torch.Tensor]:
        return self.index.sentence(i), self.targets[i]


def collate_distillation(rows: Sequence[tuple[str, torch.Tensor]]) -> dict[str, list[str] | torch.Tensor]:
    """Raw strings (the student tokenizes) and the ``(B, D)`` float32 targets."""
    return {"sentences": [r[0] for r in rows], "targets": torch.stack([r[1] for r in rows]).float()}


class CollateTeachers:
    """``combine="each"``: raw strings and ``"teachers"``, one ``(B, d_k)`` tensor per teacher (picklable)."""

    def __init__(self, dims: Sequence[int]) -> None:
        self.dims = [int(d) for d in dims]

    def __call__(self, rows: Sequence[tuple[str, torch.Tensor]]) -> dict[str, list]:
        stacked = torch.stack([r[1] for r in rows]).float()
        return {"sentences": [r[0] for r in rows], "teachers": list(stacked.split(self.dims, dim=1))}


class DistillationDataModule(ResumableDataModule):
    """Training batches ``{"sentences", "targets"}``: sentences and their teachers' mean embedding."""

    data_unit = "sentences"  # model card: one training item

    def __init__(self, data_dir: str | None = None, files: Sequence[str] | str = ("wiki/wiki_sentences_100k.txt",),
                 *, teachers: Sequence[Any], max_sentences: int | None = None, batch_size: int = 32,
                 cache_dir: str | None = None, num_workers: int = 0, seed: int = 0, shuffle: bool = True,
                 min_words: int = 1, max_words: int | None = None, encode_batch_size: int = 64,
                 encode_device: str = "cpu", align_to: Any = None, combine: str = "mean") -> None:
        super().__init__()
        if combine not in COMBINE:
            raise unknown_choice("data.combine", combine, COMBINE)
        if combine == "each" and align_to not in (None, ""):
            raise ConfigError("data.align_to maps teachers onto one space for their mean; data.combine=each keeps "
                              "each teacher's own space: set data.align_to=null")
        self.combine = combine
        if isinstance(teachers, (str, Mapping)):
            teachers = [teachers]
        self.teachers = [_plain_spec(t) for t in (teachers or [])]
        self.align_to = None if align_to in (None, "") else _plain_spec(align_to)
        if not self.teachers:
            raise ConfigError("DistillationDataModule needs at least one teacher (data.teachers=[...])")
        self.data_dir, self.files = data_dir, [files] if isinstance(files, str) else [str(f) for f in files]
        self.batch_size, self.num_workers, self.seed, self.shuffle = int(batch_size), num_workers, int(seed), shuffle
        self.max_sentences, self.min_words, self.max_words = max_sentences, min_words, max_words
        self.encode_batch_size, self.encode_device = encode_batch_size, encode_device
        self.cache_dir = cache_dir_or_root(cache_dir)
        self.dataset: DistillationDataset | None = None
        self.teacher_names: list[str] = []  # for logging; filled by prepare_data / setup
        self.teacher_dims: list[int] = []  # combine="each": each teacher's size; filled by prepare_data / setup

    @property
    def _user(self) -> str:  # who reads these vectors, for the progress lines
        return "SED" if self.combine == "mean" else "RankCSE"

    def _paths(self) -> list[Path]:
        return source_paths(self.files, self.data_dir, self.cache_dir, self.max_sentences)

    def _index(self) -> SentenceIndex:
        return SentenceIndex.build(self._paths(), self.cache_dir, self.min_words, self.max_words, self.max_sentences)

    def cache_key(self) -> dict:
        """What names the targets file, computable without loading a teacher (plain JSON)."""
        files = []
        for p in self._paths():
            st = p.stat() if p.is_file() else None
            files.append({"path": str(p.resolve()), "size": st and st.st_size, "mtime_ns": st and st.st_mtime_ns})
        key = {"version": CACHE_VERSION, "teachers": self.teachers,
               "models": [model_fingerprint(spec_model(t)) for t in self.teachers], "files": files,
               "max_sentences": self.max_sentences, "min_words": self.min_words, "max_words": self.max_words}
        if self.align_to is not None:  # only when set: the plain means cached before the option keep their names
            key["align_to"] = {"spec": self.align_to, "model": model_fingerprint(spec_model(self.align_to))}
        if self.combine != "mean":  # likewise
            key["combine"] = self.combine
        return key

    def targets_path(self, key: dict | None = None) -> Path:
        """``<cache_dir>/distillation/targets.<hash>.npy``; the sidecar is the same name with ``.json``."""
        digest = key_digest(key or self.cache_key())
        return self.cache_dir / "distillation" / f"targets.{digest}.npy"

    def _build(self, spec: str | dict):
        return build_source(spec, batch_size=self.encode_batch_size, device=self.encode_device)

    def _encoding(self, spec: str | dict, role: str = "teacher"):  # named for the ``stopped:`` line
        return stretch(f"encoding {self._user} {role} {spec_model(spec)}")

    def pending_encodes(self) -> list[tuple[str, str, int, float]]:
        """``(what, encoder, sentences, mean characters)`` per teacher ``prepare_data`` will encode (for ``runs.first_step``)."""
        _, problem = inspect_npy_cache(self.targets_path(), {})
        if not problem:
            return []
        index = self._index()
        sentences = [index.sentence(i) for i in range(len(index))]
        specs, names = [], set()
        for spec in [*self.teachers, *([self.align_to] if self.align_to is not None else [])]:
            name = spec_source_name(spec) or repr(spec)  # SED's align_to is its first teacher: encoded once, not twice
            if name not in names:
                names.add(name)
                specs.append(spec)
        return [(f"{self._user} teacher vectors", spec_model(spec), len(sentences), mean_chars(sentences))
                for spec in pending_sources(specs, sentences, self.cache_dir / "distillation")]

    def prepare_data(self) -> None:
        """Teacher vectors (cached per teacher) and their mean, once per node; one teacher loaded at a time."""
        key = self.cache_key()
        path = self.targets_path(key)
        index = self._index()
        sentences = [index.sentence(i) for i in range(len(index))]
        names, dims, fingerprints = [], [], []
        for spec in self.teachers:
            check_stop(f"loading {self._user} teacher {spec_model(spec)}")  # before each load (seconds each)
            source = self._build(spec)
            names.append(source.name)
            dims.append(source.dim)
            fingerprints.append(source.fingerprint())
            del source
        if len(set(dims)) > 1 and self.align_to is None and self.combine == "mean":
            raise ConfigError(f"SED averages its teachers' vectors, so they must have one size; got "
                              f"{', '.join(f'{n}: {d}-d' for n, d in zip(names, dims, strict=True))} "
                              f"(or map them onto the student's space first: data.align_to=<student>)")
        full = {"key": key, "fingerprints": fingerprints, "sentences": sentences_digest(sentences),
                "count": len(sentences)}
        if self.align_to is not None:
            reference_source = self._build(self.align_to)
            full["align_to"] = reference_source.fingerprint()
        self.teacher_names, self.teacher_dims = names, dims
        _, problem = inspect_npy_cache(path, full)
        if not problem:
            log.info("using cached SED targets %s (teachers %s)", path, names)
            return
        if problem != "missing":
            log.warning("SED targets %s are not usable (%s): rebuilding them", path, problem)
        reference = None
        sources = len(self.teachers) + (self.align_to is not None)
        # one counter over every teacher's pass (a cached teacher counts as done): embeddings.console.phase
        with phase(f"{self._user} teacher vectors ({sources} x {len(sentences):,} sentences)", sources * len(sentences)) as counter:
            if self.align_to is not None:
                with self._encoding(self.align_to, "align_to source"), counter.part(len(sentences)):
                    reference = cached_source_vectors(reference_source, sentences, self.cache_dir / "distillation")
                del reference_source
            total, parts = None, []
            for spec, fingerprint in zip(self.teachers, fingerprints, strict=True):
                # running sum: one teacher and one array in memory at a time
                with self._encoding(spec), counter.part(len(sentences)):
                    vectors = cached_source_vectors(self._build(spec), sentences, self.cache_dir / "distillation")
                if reference is not None and fingerprint != full["align_to"]:
                    vectors = map_onto(vectors, reference)
                if self.combine == "each":
                    parts.append(np.asarray(vectors, np.float32))
                    continue
                total = vectors.astype(np.float64) if total is None else total + vectors
        target = np.concatenate(parts, axis=1) if parts else (total / len(self.teachers)).astype(np.float32)
        extra = {"dims": dims} if parts else {}
        if reference is not None:
            extra["start_cosine"] = mean_cosine(reference, target)
            log.info("teachers mapped onto %s; its mean cosine to the targets: %.4f", spec_model(self.align_to),
                     extra["start_cosine"])
        save_npy_cache(path, target, {**full, **extra, "teachers": self.teacher_names})
        log.info("SED targets: mean of %d teachers %s, %d x %d, in %s", len(names), names,
                 *target.shape, path)

    def setup(self, stage: str | None = None) -> None:
        """Map the targets copy-on-write (pages shared by the ranks of a node); no teacher is loaded."""
        if self.dataset is not None:
            return
        path = self.targets_path()
        info, problem = inspect_npy_cache(path, {})
        if problem:
            raise DataError(f"SED targets {path} are not usable ({problem}): run prepare_data first")
        index = self._index()
        self.dataset = DistillationDataset(index, torch.from_numpy(np.load(path, mmap_mode="c")))
        self.teacher_names = list(info.get("teachers", []))
        self.teacher_dims = [int(d) for d in info.get("dims", [])]
        log.info("SED data: %d sentences (%s skipped), %d-d targets from %s", len(index), index.skipped,
                 self.target_dim, self.teacher_names)

    @property
    def target_dim(self) -> int:
        return int(self.ready_dataset().targets.shape[1])

    def train_dataloader(self) -> DataLoader:
        self.ready_dataset()  # teacher_dims first
        return self.resumable_loader(CollateTeachers(self.teacher_dims) if self.combine == "each"
                                     else collate_distillation)
