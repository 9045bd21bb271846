"""``continue_masked_lm``: the packaged generator's build step, on the tiny model and a tiny corpus.

It must be a pure function of (base, corpus, recipe) -- a cold and a warm model cache then train the same run
(issue 38) -- and leave the caller's random state alone; ``head_only`` trains the head and nothing else.
"""

from __future__ import annotations

import json

import pytest
import torch

from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.methods.mlm.continued import BUILD_INFO, Recipe, continue_masked_lm

TINY = Recipe(steps=3, batch_size=8, max_length=16, lr=1e-2, heldout=8)


def _weights(path):
    from safetensors.torch import load_file

    return load_file(path / "model.safetensors")


@pytest.fixture()
def corpus(train_data_dir):
    return train_data_dir / "wiki" / "wiki_sentences_100k.txt"


def test_the_build_is_a_function_of_its_inputs_and_leaves_the_rng_alone(tiny_model_dir, corpus, tmp_path, one_thread):
    torch.manual_seed(1234)
    before = torch.get_rng_state()
    facts = continue_masked_lm(str(tiny_model_dir), corpus, tmp_path / "a", TINY)
    assert torch.equal(torch.get_rng_state(), before)
    continue_masked_lm(str(tiny_model_dir), corpus, tmp_path / "b", TINY)
    a, b = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((tmp_path / "a" / BUILD_INFO).read_text()) == facts
    assert facts["heldout_sentences"] == 8 and 0.0 <= facts["heldout_mlm_accuracy"] <= 1.0
    assert json.loads((tmp_path / "a" / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]
    other = continue_masked_lm(str(tiny_model_dir), corpus, tmp_path / "c", Recipe(**{**TINY.__dict__, "seed": 1}))
    assert other["heldout_mlm_loss"] != facts["heldout_mlm_loss"]  # the seed reaches the head, order and masks


def test_head_only_trains_the_head_and_leaves_the_encoder_as_it_was(tiny_model_dir, corpus, tmp_path, one_thread):
    continue_masked_lm(str(tiny_model_dir), corpus, tmp_path / "head", Recipe(**{**TINY.__dict__, "head_only": True}))
    continue_masked_lm(str(tiny_model_dir), corpus, tmp_path / "all", TINY)
    base, head, full = _weights(tiny_model_dir), _weights(tmp_path / "head"), _weights(tmp_path / "all")
    encoder = [k for k in base if not k.startswith("pooler.")]
    assert all(torch.equal(head[f"bert.{k}"], base[k]) for k in encoder)
    assert not all(torch.equal(full[f"bert.{k}"], base[k]) for k in encoder)
    assert not torch.equal(head["cls.predictions.transform.dense.weight"], full["cls.predictions.transform.dense.weight"])


def test_a_corpus_too_small_for_its_held_out_part_is_one_line(tiny_model_dir, tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("one line\n\n")
    with pytest.raises(DataError, match="1 non-empty lines, need more than the 8 held out"):
        continue_masked_lm(str(tiny_model_dir), small, tmp_path / "out", TINY)
