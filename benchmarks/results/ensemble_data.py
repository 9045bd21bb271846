"""The data of the ensemble benchmarks: fitting corpus, STS sentences, and every source's cached vectors.

Why one module: the meta-embedding table, its ablation and the SED runs must see exactly the same
sentences and the same source vectors; the slow sources (all-mpnet-base-v2) are encoded once per corpus
into ``<cache>/sources`` (``embeddings.sources.cache``) and every later run reads them back.

    python -m benchmarks.results.ensemble_data --data-dir ../shared/data   # warm the caches (all five sources)
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence

import numpy as np
import torch

from sts_lightning.datamodules.sentence_files import read_sentences
from sts_lightning.embeddings.io.cache_root import cache_dir_or_root
from sts_lightning.embeddings.sources.build import build_source
from sts_lightning.embeddings.sources.cache import cached_source_vectors
from sts_lightning.embeddings.sources.sentence_source import SentenceSource
from sts_lightning.sts.tasks import STSTask, load_task

log = logging.getLogger(__name__)

ENSEMBLE = ("all-mpnet-base-v2", "paraphrase-MiniLM-L3-v2", "all-MiniLM-L6-v2", "glove", "multilingual-e5-small")
SHORT = {"all-mpnet-base-v2": "mpnet", "paraphrase-MiniLM-L3-v2": "L3", "all-MiniLM-L6-v2": "L6",
         "glove": "GloVe", "multilingual-e5-small": "e5"}
FIT_FILES = ("onebillion/1b_benchmark.dev.tokens", "onebillion/1b_benchmark.test.tokens")
TASKS = ("sts12", "sts16", "stsb-dev", "sick-train+sick-trial")


def fitting_sentences(data_dir: str | None, files: Sequence[str] = FIT_FILES, max_words: int = 59,
                      max_sentences: int | None = None, cache_dir: str | None = None) -> list[str]:
    """The paper's fitting corpus on what we have: One Billion Word sentences of < 60 words, de-duplicated."""
    return read_sentences(files, data_dir, max_words=max_words, max_sentences=max_sentences, cache_dir=cache_dir)


def sts_tasks(data_dir: str | None, names: Sequence[str] = TASKS) -> list[STSTask]:
    return [load_task(name, data_dir) for name in names]


def task_sentences(tasks: Sequence[STSTask]) -> list[str]:
    return list(dict.fromkeys(s for t in tasks for p in t.subsets.values() for s in (*p.sentences1, *p.sentences2)))


class LookupSource(SentenceSource):
    """A source answered from precomputed vectors (benchmarks score many methods on the same sentences)."""

    def __init__(self, name: str, sentences: Sequence[str], vectors: np.ndarray) -> None:
        self.name = name
        self.rows = {s: i for i, s in enumerate(sentences)}
        self.vectors = torch.from_numpy(np.asarray(vectors, dtype=np.float32))
        self._spec = {"model": name}

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def embed(self, sentences: Sequence[str]) -> torch.Tensor:
        missing = [s for s in sentences if s not in self.rows]
        if missing:
            raise KeyError(f"{self.name}: {len(missing)} sentences were not precomputed, e.g. {missing[0]!r}")
        return self.vectors[[self.rows[s] for s in sentences]]

    def fingerprint(self) -> dict:
        return {"kind": "lookup", "name": self.name}


def source_vectors(names: Sequence[str], sentences: Sequence[str], cache_dir: str | None) -> dict[str, np.ndarray]:
    """Every source's vectors of ``sentences`` (cached); sources are loaded one at a time to bound memory."""
    out = {}
    for name in names:
        t0 = time.perf_counter()
        source = build_source(name)
        out[name] = cached_source_vectors(source, sentences, cache_dir_or_root(cache_dir))
        log.info("%s: %s in %.0fs", name, out[name].shape, time.perf_counter() - t0)
        del source
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--sources", default=",".join(ENSEMBLE))
    parser.add_argument("--max-fit", type=int, default=None, help="use the first N fitting sentences")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    fit = fitting_sentences(args.data_dir, max_sentences=args.max_fit, cache_dir=args.cache_dir)
    sts = task_sentences(sts_tasks(args.data_dir))
    log.info("fitting corpus: %d sentences; STS sentences: %d", len(fit), len(sts))
    names = args.sources.split(",")
    source_vectors(names, sts, args.cache_dir)
    source_vectors(names, fit, args.cache_dir)


if __name__ == "__main__":
    main()
