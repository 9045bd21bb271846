"""How much STS signal does a plain-sentence corpus hold? Count-based word vectors as a reference point.

Why: CT from scratch asks a random BERT to rise well above its untrained STS-B score (a bag of random token vectors:
lexical overlap) from the local Wikipedia sentences alone. What the corpus alone can teach is co-occurrence: PPMI +
truncated SVD over the same wordpieces (window 5, context smoothing 0.75, Levy et al. 2015), averaged per sentence;
``--random-bert`` adds the untrained model with and without IDF weights. No training loop: seconds on a CPU.

    python -m benchmarks.studies.cooccurrence_ceiling --data-dir ../shared/data [--random-bert outputs/random_bert]
"""

from __future__ import annotations

import argparse
import collections
import math
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import svds

from sts_lightning.datamodules.sentence_files import read_sentences
from sts_lightning.embeddings.encoders.packaged import resolve_model_path
from sts_lightning.sts.scoring import correlations
from sts_lightning.sts.tasks import load_task


def ppmi_svd_vectors(token_ids: Sequence[Sequence[int]], vocab: int, window: int = 5, dim: int = 256,
                     smoothing: float = 0.75) -> np.ndarray:
    """``(vocab, dim)`` word vectors: SVD of the positive PMI matrix of symmetric-window co-occurrences."""
    rows, cols = [], []
    for ids in token_ids:
        ids = np.asarray(ids, dtype=np.int64)
        for k in range(1, window + 1):  # each pair k apart, counted in both directions
            rows += [ids[:-k], ids[k:]]
            cols += [ids[k:], ids[:-k]]
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    summed = sp.coo_matrix((np.ones(len(rows), np.float64), (rows, cols)), shape=(vocab, vocab)).tocsr()
    counts = summed.tocoo()
    total = counts.data.sum()
    word_totals = np.asarray(summed.sum(1)).ravel()
    context = np.asarray(summed.sum(0)).ravel() ** smoothing
    context = context / context.sum() * total
    pmi = np.log(counts.data * total / (word_totals[counts.row] * context[counts.col]))
    keep = pmi > 0
    ppmi = sp.csr_matrix((pmi[keep], (counts.row[keep], counts.col[keep])), shape=(vocab, vocab))
    u, s, _ = svds(ppmi, k=dim)
    return u * np.sqrt(s)


def idf_weights(token_ids: Sequence[Sequence[int]], vocab: int) -> np.ndarray:
    df = collections.Counter(t for ids in token_ids for t in set(ids))
    n = len(token_ids)
    return np.array([math.log((n + 1) / (df.get(t, 0) + 1)) for t in range(vocab)])


def spearman_of(vectors1: np.ndarray, vectors2: np.ndarray, gold: Sequence[float]) -> float:
    norm = np.linalg.norm(vectors1, axis=1) * np.linalg.norm(vectors2, axis=1) + 1e-12
    return correlations((vectors1 * vectors2).sum(1) / norm, np.asarray(gold))["spearman"]


def bag_of_vectors(tokenize, sentences: Sequence[str], table: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    out = []
    for sentence in sentences:
        ids = tokenize(sentence)
        w = np.ones(len(ids)) if weights is None else weights[ids]
        out.append((table[ids] * w[:, None]).sum(0) / max(w.sum(), 1e-12))
    return np.array(out)


def random_bert_rows(path: str, pairs, idf: np.ndarray, special: set[int]) -> dict[str, float]:
    """The untrained random BERT, mean pooling with uniform vs IDF token weights (special tokens 0 for IDF)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()

    def embed(sentences: Sequence[str], weighted: bool) -> np.ndarray:
        out = []
        for i in range(0, len(sentences), 64):
            batch = tok(list(sentences[i:i + 64]), padding=True, truncation=True, max_length=64, return_tensors="pt")
            with torch.no_grad():
                states = model(**batch).last_hidden_state
            w = batch["attention_mask"].float()
            if weighted:
                ids = batch["input_ids"]
                w = w * torch.from_numpy(idf[ids.numpy()]).float() * (~torch.isin(ids, torch.tensor(sorted(special))))
            out.append(((states * w[..., None]).sum(1) / w.sum(1, keepdim=True).clamp_min(1e-12)).numpy())
        return np.concatenate(out)

    return {f"random BERT, {'IDF-weighted' if weighted else 'mean'} pooling":
            spearman_of(embed(pairs.sentences1, weighted), embed(pairs.sentences2, weighted), pairs.scores)
            for weighted in (False, True)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--corpus", default="wiki/wiki_sentences_100k.txt")
    parser.add_argument("--tokenizer", default="all-MiniLM-L6-v2", help="wordpieces of the scratch BERT's vocab")
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--random-bert", default=None, help="also score this untrained model (mean vs IDF pooling)")
    args = parser.parse_args()
    from transformers import AutoTokenizer


    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_path(args.tokenizer)))
    tokenize = lambda s: tokenizer(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    corpus = [tokenize(s) for s in read_sentences([args.corpus], args.data_dir)]
    vocab = tokenizer.vocab_size
    idf = idf_weights(corpus, vocab)
    table = ppmi_svd_vectors(corpus, vocab, window=args.window, dim=args.dim)
    pairs = next(iter(load_task("stsb-dev", args.data_dir).subsets.values()))
    rows = {f"PPMI-SVD {args.dim}-d ({len(corpus)} sentences), {name}":
            spearman_of(bag_of_vectors(tokenize, pairs.sentences1, table, w),
                        bag_of_vectors(tokenize, pairs.sentences2, table, w), pairs.scores)
            for name, w in (("mean", None), ("IDF-weighted", idf))}
    if args.random_bert:
        rows.update(random_bert_rows(args.random_bert, pairs, idf, set(tokenizer.all_special_ids)))
    print("| STS-B dev Spearman x100 | |\n|---|---|")
    for name, value in rows.items():
        print(f"| {name} | {value:.2f} |")


if __name__ == "__main__":
    main()
