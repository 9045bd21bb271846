"""Seeded word-level augmentation: the data-uncertainty sampler of Sen2Pro (Shen et al. 2023, Sec. 3.1).

Each copy applies ONE random op (drop, swap, replace or insert a whitespace word) among those that change the
sentence; randomness is per (seed, sentence text, copy index), so a copy depends on no other sentence or process.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable, Sequence

from sts_lightning.embeddings.errors import ConfigError, DataError, unknown_choice

OPS: tuple[str, ...] = ("drop", "swap", "replace", "insert")
_WORD = re.compile(r"\w+(?:['\-]\w+)*")


def stable_seed(*parts: object) -> int:
    """A 63-bit seed from ``parts`` that is the same in every process (unlike ``hash``)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big") >> 1


def sentence_rng(seed: int, sentence: str, index: int) -> random.Random:
    """The RNG of copy ``index`` of ``sentence``: depends on nothing else."""
    return random.Random(stable_seed("augment", seed, index, sentence))


def validate_ops(ops: Iterable[str]) -> tuple[str, ...]:
    """Check an op set (non-empty, known names); duplicates are dropped, order kept."""
    if isinstance(ops, str):
        ops = (ops,)
    ops = tuple(dict.fromkeys(ops))
    if not ops:
        raise ConfigError("augmentation ops: at least one of " + ", ".join(OPS) + " is needed")
    for op in ops:
        if op not in OPS:
            raise unknown_choice("augmentation op", op, OPS)
    return ops


def build_vocabulary(sentences: Iterable[str]) -> tuple[str, ...]:
    """Sorted distinct words (``\\w`` runs, inner ' and - kept) of ``sentences``."""
    return tuple(sorted({w for s in sentences for w in _WORD.findall(s)}))


def drop_word(words: Sequence[str], rng: random.Random) -> list[str]:
    """Remove one word; needs at least 2 words so the result is never empty."""
    if len(words) < 2:
        raise ValueError("drop needs at least 2 words")
    i = rng.randrange(len(words))
    return [*words[:i], *words[i + 1:]]


def swap_words(words: Sequence[str], rng: random.Random) -> list[str]:
    """Exchange two positions holding different words, drawn by rejection (no O(L^2) list of pairs)."""
    if len(set(words)) < 2:
        raise ValueError("swap needs two different words")
    while True:
        i, j = rng.sample(range(len(words)), 2)
        if words[i] != words[j]:
            break
    out = list(words)
    out[i], out[j] = out[j], out[i]
    return out


def replace_word(words: Sequence[str], vocabulary: Sequence[str], rng: random.Random) -> list[str]:
    """Put a vocabulary word different from the current one at a random position (drawn by rejection)."""
    positions = [i for i, w in enumerate(words) if len(vocabulary) >= 2 or (vocabulary and vocabulary[0] != w)]
    if not positions:
        raise ValueError("replace needs a vocabulary word different from the replaced one")
    i = rng.choice(positions)
    for _ in range(64):
        new = rng.choice(vocabulary)
        if new != words[i]:
            break
    else:  # only reachable with a vocabulary of repeated words
        choices = [w for w in vocabulary if w != words[i]]
        if not choices:
            raise ValueError("replace needs a vocabulary word different from the replaced one")
        new = rng.choice(choices)
    out = list(words)
    out[i] = new
    return out


def insert_word(words: Sequence[str], vocabulary: Sequence[str], rng: random.Random) -> list[str]:
    """Insert a vocabulary word at any of the ``len(words) + 1`` gaps."""
    if not vocabulary:
        raise ValueError("insert needs a non-empty vocabulary")
    i = rng.randrange(len(words) + 1)
    return [*words[:i], rng.choice(vocabulary), *words[i:]]


def applicable_ops(words: Sequence[str], vocabulary: Sequence[str], ops: Sequence[str]) -> list[str]:
    """The ops of ``ops`` that yield a non-empty sentence different from ``words`` (distinct ``vocabulary``)."""
    ok = {
        "drop": len(words) >= 2,
        "swap": len(set(words)) >= 2,
        "replace": len(vocabulary) >= 2 or (len(vocabulary) == 1 and any(w != vocabulary[0] for w in words)),
        "insert": len(vocabulary) > 0,
    }
    return [op for op in ops if ok[op]]


def augment_sentence(sentence: str, vocabulary: Sequence[str], rng: random.Random,
                     ops: Sequence[str] = OPS) -> str:
    """One augmented copy: a single op drawn uniformly among the applicable ones."""
    words = sentence.split()
    if not words:
        raise DataError(f"cannot augment an empty sentence: {sentence!r}")
    usable = applicable_ops(words, vocabulary, ops)
    if not usable:
        return sentence
    op = rng.choice(usable)
    if op == "drop":
        out = drop_word(words, rng)
    elif op == "swap":
        out = swap_words(words, rng)
    elif op == "replace":
        out = replace_word(words, vocabulary, rng)
    else:
        out = insert_word(words, vocabulary, rng)
    return " ".join(out)


def augment(sentences: Sequence[str], n_copies: int, seed: int = 0, ops: Sequence[str] = OPS,
            vocabulary: Sequence[str] | None = None) -> list[list[str]]:
    """``out[i][k]``: copy k of ``sentences[i]``; ``vocabulary`` defaults to ``build_vocabulary(sentences)``."""
    ops = validate_ops(ops)
    vocab = build_vocabulary(sentences) if vocabulary is None else tuple(sorted(set(vocabulary)))
    return [[augment_sentence(s, vocab, sentence_rng(seed, s, k), ops) for k in range(n_copies)]
            for s in sentences]
