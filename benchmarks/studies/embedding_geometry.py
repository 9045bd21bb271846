"""Where does an encoder's STS score come from? Geometry diagnostics of trained (or untrained) encoders.

Why: CT from scratch rises a little and then falls; this tells "the copies learned little" from "they learned the
wrong thing". Each encoder's mean-pooled vectors are scored on STS-B dev as is, centred and whitened (the best
*linear* post-processing, fitted on corpus sentences), with isotropy (mean cosine of random pairs, the top principal
direction's variance share) and the length shortcut (how much cosine and norm follow sentence length).

    python -m benchmarks.studies.embedding_geometry --data-dir ../shared/data outputs/random_bert R/run/export R/run/checkpoints/last.ckpt
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from sts_lightning.datamodules.sentence_files import read_sentences
from sts_lightning.embeddings.encoders.checkpoint import encoder_from_checkpoint
from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.methods.pooling import PoolingScorer
from sts_lightning.embeddings.methods.whitening import maths
from sts_lightning.embeddings.methods.whitening.maths import moment_sums, moments
from sts_lightning.embeddings.scoring.similarity import cosine_rows
from sts_lightning.sts.scoring import correlations
from sts_lightning.sts.tasks import load_task


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The project's row cosine (``embeddings.scoring.similarity.cosine_rows``) on numpy rows."""
    return cosine_rows(torch.from_numpy(a), torch.from_numpy(b)).numpy()


def principal_axes(corpus: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(mean, axes, variances)``: the corpus mean and the decomposition of its covariance, largest first.

    The maths of the BERT-whitening method (``embeddings.methods.whitening.maths``), on numpy rows.
    """
    mean, cov = moments(moment_sums(torch.from_numpy(np.asarray(corpus, dtype=np.float64))))
    axes, variances = maths.principal_axes(cov)
    return mean.numpy(), axes.numpy(), variances.numpy()


def whitening(corpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, W)`` with ``(x - mean) @ W`` of identity covariance over ``corpus`` (BERT-whitening, Su et al. 2021)."""
    mean, axes, variances = principal_axes(corpus)
    return mean, whitener(axes, variances)


def whitener(axes: np.ndarray, variances: np.ndarray) -> np.ndarray:
    """The whitening matrix of a covariance decomposition (``principal_axes``), all columns."""
    return maths.whitener(torch.from_numpy(axes), torch.from_numpy(variances)).numpy()


def geometry_row(a: np.ndarray, b: np.ndarray, gold: Sequence[float], corpus: np.ndarray,
                 len_a: Sequence[int], len_b: Sequence[int], corpus_len: Sequence[int]) -> dict[str, float]:
    """Diagnostics of one encoder from its vectors of the STS pairs ``(a, b)`` and of corpus sentences."""
    mean, axes, variances = principal_axes(corpus)
    w = whitener(axes, variances)  # the one decomposition also gives the top-direction share
    half = len(corpus) // 2
    raw = cosines(a, b)
    return {
        "cosine": _spearman(raw, gold),
        "centred": _spearman(cosines(a - mean, b - mean), gold),
        "whitened": _spearman(cosines((a - mean) @ w, (b - mean) @ w), gold),
        "random_pair_cosine": float(cosines(corpus[:half], corpus[half:2 * half]).mean()),
        "top_direction_share": float(variances[0] / variances.sum()),
        "cosine_vs_length_gap": _spearman(raw, -np.abs(np.subtract(len_a, len_b))) / 100,
        "norm_vs_length": _spearman(np.linalg.norm(corpus, axis=1), corpus_len) / 100,
    }


def _spearman(x: np.ndarray, y: Sequence[float]) -> float:
    """Spearman x100 by ``sts.scoring.correlations`` (NaN when a side is constant, e.g. no length gap at all)."""
    return correlations(x, np.asarray(y, dtype=np.float64))["spearman"]


def _vectors(scorer, sentences: Sequence[str]) -> np.ndarray:
    return scorer.represent(sentences)["embedding"].float().cpu().numpy().astype(np.float64)


def _encoder(path: str, max_length: int):

    if path.endswith(".ckpt"):
        return encoder_from_checkpoint(path, max_length=max_length)
    return HFEncoder.from_pretrained(path, max_length=max_length)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+", help="model directories, exports or training checkpoints (.ckpt)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--corpus", default="wiki/wiki_sentences_100k.txt")
    parser.add_argument("--corpus-sentences", type=int, default=3000, help="the LAST n corpus lines (CT samples from the start)")
    parser.add_argument("--max-length", type=int, default=64)
    args = parser.parse_args()
    missing = [m for m in args.models if not Path(m).exists()]
    if missing:
        parser.error(f"not found: {', '.join(missing)} (give model directories, exports or .ckpt files)")

    pairs = next(iter(load_task("stsb-dev", args.data_dir).subsets.values()))
    corpus = list(read_sentences([args.corpus], args.data_dir))[-args.corpus_sentences:]
    words = lambda sentences: [len(s.split()) for s in sentences]  # noqa: E731
    print("| model | STS-B dev cosine | centred | whitened | random-pair cosine | top direction share "
          "| cosine ~ -length gap | norm ~ length |\n|---|---|---|---|---|---|---|---|")
    for path in args.models:
        scorer = PoolingScorer(_encoder(path, args.max_length), "mean")
        row = geometry_row(_vectors(scorer, pairs.sentences1), _vectors(scorer, pairs.sentences2), pairs.scores,
                           _vectors(scorer, corpus),
                           words(pairs.sentences1), words(pairs.sentences2), words(corpus))
        name = "/".join(Path(path).parts[-3:])
        print(f"| {name} | {row['cosine']:.2f} | {row['centred']:.2f} | {row['whitened']:.2f} | "
              f"{row['random_pair_cosine']:.3f} | {row['top_direction_share']:.3f} | "
              f"{row['cosine_vs_length_gap']:.2f} | {row['norm_vs_length']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
