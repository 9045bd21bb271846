"""PromptBERT's templates (embeddings.methods.promptbert.template): the checks, and the ids against the authors' own
string handling, re-implemented here from kongds/Prompt-BERT at 690ba6ef3a1d954c24d9a992ff8e339816866a05
(``evaluation.py``: ``batcher`` (conftest's ``their_filled``) and ``get_delta``; ``train.py``: the template split and ``prepare_features``),
written in their syntax (``*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*``)."""

from __future__ import annotations

import pytest

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.promptbert.template import (
    DEFAULT,
    UNSUP_BERT,
    Template,
    eval_ids,
    mask_slot,
    prefix_length,
    template_only,
    template_problem,
    train_ids,
)

THEIRS = {DEFAULT: '*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*',
          UNSUP_BERT[0]: '*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*'}
SENTENCES = ["a man plays a guitar", "two children kick a ball .", "is the dog running ?", 'the cat said "hi"',
             "A woman cuts an onion in the kitchen"]


@pytest.fixture(scope="module")
def tokenizer(prompt_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(prompt_model_dir))


def their_delta_template(tokenizer, template: str):
    """evaluation.py's get_delta: the template-only ids and bs_length."""
    template = template.replace("*mask*", tokenizer.mask_token).replace("*sep+*", "").replace("*cls*", "") \
        .replace("*sent_0*", " ")
    bs_length = len(tokenizer.encode(template.split(" ")[0].replace("_", " ").strip())) - 2 + 1
    ids = tokenizer([template.replace("_", " ").strip().replace("   ", " ")])["input_ids"][0]
    return ids, bs_length


def their_train_ids(tokenizer, template: str, sentences, max_seq_length: int, roberta: bool = False):
    """train.py: bs / es from the template split (bs stripped for a RoBERTa model), ``bs + encode(s)[:max] + es``."""
    template = template.replace("*mask*", tokenizer.mask_token).replace("*sep+*", "").replace("*cls*", "") \
        .replace("*sent_0*", " ").split(" ")
    bs = template[0].replace("_", " ")
    bs = tokenizer.encode(bs.strip() if roberta else bs)[:-1]
    es = tokenizer.encode(template[1].replace("_", " "))[1:]
    return [bs + tokenizer.encode(s, add_special_tokens=False)[:max_seq_length] + es for s in sentences]


@pytest.mark.parametrize("ours", list(THEIRS))
def test_ids_are_the_authors(tokenizer, ours, their_filled):
    theirs = THEIRS[ours]
    template = Template(ours)
    ids, lengths = eval_ids(tokenizer, template, SENTENCES, max_length=None)
    assert ids == tokenizer(their_filled(tokenizer, theirs, SENTENCES))["input_ids"]  # evaluation.py's batcher
    only, bs_length = their_delta_template(tokenizer, theirs)
    assert template_only(tokenizer, template) == only and prefix_length(tokenizer, template) == bs_length
    assert lengths == [len(x) - len(only) for x in ids]  # evaluation.py's blen
    assert train_ids(tokenizer, template, SENTENCES, 4) == their_train_ids(tokenizer, theirs, SENTENCES, 4)
    slot = mask_slot(tokenizer, template)
    assert all(row[slot] == tokenizer.mask_token_id for row in ids) and slot < 0


def test_the_cap_cuts_the_sentence_not_the_mask(tokenizer):
    template = Template("[MASK] : the [X] .")  # the mask before the sentence: a slot from the start
    ids, lengths = eval_ids(tokenizer, template, SENTENCES, max_length=3)
    assert max(lengths) == 3 and all(row[mask_slot(tokenizer, template)] == tokenizer.mask_token_id for row in ids)
    ids, lengths = eval_ids(tokenizer, Template(DEFAULT), SENTENCES, max_length=3)
    assert max(lengths) == 3 and all(row[-3] == tokenizer.mask_token_id for row in ids)
    assert eval_ids(tokenizer, Template(DEFAULT), ["a dog runs"], None, add_period=False)[1] == [3]


def test_roberta_ids_are_the_authors(roberta_tokenizer, their_filled):
    """run.sh unsup-roberta's template, where spaces are tokens: ``'_*sent_0*_'`` is ``' [X] '`` here."""
    tokenizer, theirs = roberta_tokenizer, "*cls*_This_sentence_:_'_*sent_0*_'_means*mask*.*sep+*"
    template = Template("This sentence : ' [X] ' means[MASK].")
    ids, lengths = eval_ids(tokenizer, template, SENTENCES, max_length=None)
    assert ids == tokenizer(their_filled(tokenizer, theirs, SENTENCES))["input_ids"]
    only, bs_length = their_delta_template(tokenizer, theirs)
    assert template_only(tokenizer, template) == only and prefix_length(tokenizer, template) == bs_length
    assert lengths == [len(x) - len(only) for x in ids]
    assert train_ids(tokenizer, template, SENTENCES, 4) == their_train_ids(tokenizer, theirs, SENTENCES, 4, roberta=True)
    slot = mask_slot(tokenizer, template)
    assert tokenizer.mask_token == "<mask>" and all(row[slot] == tokenizer.mask_token_id for row in ids)


@pytest.mark.parametrize(("text", "says"), [
    ("", "empty"), ("   ", "empty"), ("the [X] is good .", "exactly one [MASK]"), ("it means [MASK] .", "exactly one [X]"),
    ("[X] [X] [MASK]", "found 2"), (None, "not NoneType")])
def test_bad_templates_name_the_key(text, says):
    assert says in template_problem(text)
    with pytest.raises(ConfigError, match=r"^model\.template2=") as err:
        Template(text, "model.template2")
    assert says in str(err.value) and "\n" not in str(err.value)
