"""``benchmarks.studies.bag_of_words_ct``: the transformer-free CT control (issue 3) learns co-occurrence, and the
``positions`` variant really gives the bag a length code."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import torch

from benchmarks.studies.bag_of_words_ct import WordpieceBag, main, train_variant
from sts_lightning.sts.tasks import load_task

TOPICS = ("man plays guitar piano sings song", "dog cat runs park street ball", "woman cooks kitchen onion tomato food")


def _corpus(n: int, seed: int = 0) -> list[str]:
    """Sentences whose words come from one topic each: halves agree only through their topic."""
    rng = np.random.default_rng(seed)
    words = [t.split() for t in TOPICS]
    return [" ".join(rng.choice(words[rng.integers(len(words))], size=8)) for _ in range(n)]


def test_positions_variant_adds_special_tokens_and_one_position_id_per_token(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    words = WordpieceBag(tokenizer, 8, False, torch.Generator().manual_seed(0))
    positions = WordpieceBag(tokenizer, 8, True, torch.Generator().manual_seed(0))
    assert len(words.ids("a man plays")) == 3
    ids = positions.ids("a man plays")
    assert ids[0] == tokenizer.cls_token_id and ids[4] == tokenizer.sep_token_id
    assert ids[5:] == [tokenizer.vocab_size + i for i in range(5)]
    # a length code: two unrelated texts of equal length share every position vector, of different length not
    assert positions.ids("dog cat")[3:] == positions.ids("man sings")[3:]
    assert positions.ids("dog cat")[3:] != positions.ids("man sings a song")[5:]


def test_words_variant_learns_topics_from_halves(tiny_model_dir, tiny_data_dir, one_thread):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    pairs = next(iter(load_task("stsb-dev", tiny_data_dir).subsets.values()))
    args = argparse.Namespace(seed=0, dim=16, lr=3e-2, epochs=3, batch_size=16, points=2, scale=20.0)
    torch.manual_seed(0)
    rows, trained = train_variant("words", _corpus(320), pairs, tokenizer, args)
    assert [r[0] for r in rows] == [0, 30, 60]
    assert rows[-1][1] < rows[1][1]  # the in-batch loss falls
    untrained = WordpieceBag(tokenizer, 16, False, torch.Generator().manual_seed(0)).table.weight.detach()

    def topic_gap(table: torch.Tensor) -> float:
        """Mean cosine of word vectors within a topic minus across topics."""
        vectors = [torch.nn.functional.normalize(table[tokenizer(t, add_special_tokens=False)["input_ids"]], dim=1)
                   for t in TOPICS]
        within = np.mean([(v @ v.T).mean().item() for v in vectors])
        across = np.mean([(vectors[i] @ vectors[j].T).mean().item() for i in range(3) for j in range(3) if i != j])
        return within - across

    assert topic_gap(trained.table.weight.detach()) > topic_gap(untrained) + 0.3


def test_missing_corpus_is_a_clear_error(tiny_data_dir, tiny_model_dir, capsys):
    with pytest.raises(SystemExit):
        main(["--data-dir", str(tiny_data_dir), "--tokenizer", str(tiny_model_dir), "--corpus", "nope.txt"])
    assert "nope.txt not found" in capsys.readouterr().err
