"""The training-free prompt scorer (embeddings.methods.promptbert.scorer) against the authors' evaluation, and its
one-line errors.

The oracle is kongds/Prompt-BERT's ``evaluation.py`` (commit 690ba6ef3a1d954c24d9a992ff8e339816866a05), its
``batcher`` with ``--mask_embedding_sentence [--mask_embedding_sentence_delta] [--mask_embedding_sentence_org_mlp]``
and its ``get_delta``, re-implemented here: the filled templates padded in one batch, ``last_hidden[input_ids ==
mask]``, minus ``delta[attention_mask.sum(-1) - template_len]`` (their 256 template rows cut to 48: the tiny model
has 96 positions). Tolerance: the same fp32 arithmetic on other batch shapes (length-sorted, packed), a few ulps of
states of size ~1 summed over 32 features.
"""

from __future__ import annotations

import types

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError, UnsupportedError
from sts_lightning.embeddings.methods.promptbert.head import head_for, load_head, write_prompt_export
from sts_lightning.embeddings.methods.promptbert.scorer import PromptScorer
from sts_lightning.embeddings.scoring.registry import build_scorer, check_scorer_spec

THEIR_TEMPLATE = '*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*'
SENTENCES = ["a man plays a guitar", "two children kick a ball .", "is the dog running ?", "a cat",
             "the woman cuts an onion in the kitchen and the man cooks food on the street"]
TOL = 1e-5


def their_vectors(filled, model, tokenizer, sentences, delta: bool, mlp=None, rows: int = 48):
    batch = tokenizer(filled(tokenizer, THEIR_TEMPLATE, sentences), return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True, return_dict=True)
        pooled = out.last_hidden_state[batch["input_ids"] == tokenizer.mask_token_id]
        if mlp is not None:
            pooled = mlp(pooled)
        if delta:
            bare = THEIR_TEMPLATE.replace("*mask*", tokenizer.mask_token).replace("*sep+*", "") \
                .replace("*cls*", "").replace("*sent_0*", " ")
            bs_length = len(tokenizer.encode(bare.split(" ")[0].replace("_", " ").strip())) - 2 + 1
            d = tokenizer([bare.replace("_", " ").strip().replace("   ", " ")], return_tensors="pt")
            d["position_ids"] = torch.arange(d["input_ids"].shape[1]).unsqueeze(0)
            d = {k: v.repeat(rows, 1) for k, v in d.items()}
            d["position_ids"][:, bs_length:] += torch.arange(rows).unsqueeze(-1)
            states = model(**d, output_hidden_states=True, return_dict=True).hidden_states[-1]
            noise = states[d["input_ids"] == tokenizer.mask_token_id]
            blen = batch["attention_mask"].sum(-1) - d["input_ids"].shape[1]
            pooled = pooled - (mlp(noise[blen]) if mlp is not None else noise[blen])
    return pooled


@pytest.fixture(scope="module")
def encoder(prompt_model_dir):
    from sts_lightning.embeddings.encoders.hf import HFEncoder

    return HFEncoder.from_pretrained(str(prompt_model_dir), batch_size=2)  # several passes, length-sorted


@pytest.mark.parametrize("denoise", [False, True])
def test_equals_the_authors_evaluation(encoder, denoise, their_filled, one_thread):
    ours = build_scorer({"name": "prompt", "denoise": denoise}, encoder).represent(SENTENCES)["embedding"]
    theirs = their_vectors(their_filled, encoder.model, encoder.tokenizer, SENTENCES, denoise)
    torch.testing.assert_close(ours, theirs, atol=TOL, rtol=0)
    other = build_scorer({"name": "prompt", "denoise": not denoise}, encoder).represent(SENTENCES)["embedding"]
    assert (other - ours).abs().max() > 100 * TOL  # denoising changes the vector: the test can tell them apart


def test_the_supervised_head_is_applied_to_both_states(encoder, tmp_path, their_filled, one_thread):
    torch.manual_seed(3)
    head = head_for(encoder.model.config)
    write_prompt_export(tmp_path, {}, head)
    ours = PromptScorer(encoder, denoise=True, head=str(tmp_path)).represent(SENTENCES)["embedding"]
    theirs = their_vectors(their_filled, encoder.model, encoder.tokenizer, SENTENCES, True, mlp=load_head(tmp_path))
    torch.testing.assert_close(ours, theirs, atol=TOL, rtol=0)
    with pytest.raises(ConfigError, match="is not a PromptBERT export: no such directory"):
        PromptScorer(encoder, head=str(tmp_path / "missing"))
    (tmp_path / "unsup").mkdir()
    write_prompt_export(tmp_path / "unsup", {}, None)  # an unsupervised export: settings, no head
    with pytest.raises(ConfigError, match="holds no head"):
        PromptScorer(encoder, head=str(tmp_path / "unsup"))


def test_duplicates_and_order(encoder, one_thread):
    scorer = PromptScorer(encoder, denoise=True)
    both = scorer.represent([SENTENCES[1], SENTENCES[0], SENTENCES[1]])["embedding"]
    alone = scorer.represent(SENTENCES[:2])["embedding"]
    torch.testing.assert_close(both, alone[[1, 0, 1]], atol=TOL, rtol=0)


@pytest.mark.parametrize(("options", "says"), [
    ({"template": ""}, "template='': the template is empty"),
    ({"template": "it means [MASK] ."}, "needs exactly one [X]"),
    ({"template": 'This sentence : "[X]" means .'}, "needs exactly one [MASK]"),
    ({"denoise": "yes"}, "denoise='yes': use true or false"),
])
def test_bad_options_are_one_line_before_any_model(options, says):
    with pytest.raises(ConfigError) as err:
        check_scorer_spec({"name": "prompt", **options})  # what evaluate.py and load() run before loading
    assert str(err.value).startswith("scorer prompt: ") and says in str(err.value) and "\n" not in str(err.value)


def test_an_encoder_without_a_mask_token_is_unsupported():
    with pytest.raises(UnsupportedError, match="needs a transformer encoder whose tokenizer has a mask token"):
        PromptScorer(types.SimpleNamespace(name="glove"))


def test_the_python_api_takes_it(prompt_model_dir, encoder, one_thread):
    from sts_lightning.api import load

    model = load(str(prompt_model_dir), scorer={"name": "prompt", "denoise": True}, batch_size=2)
    torch.testing.assert_close(model.encode(SENTENCES), PromptScorer(encoder, denoise=True).represent(SENTENCES)[
        "embedding"], atol=TOL, rtol=0)
    with pytest.raises(ConfigError, match="scorer prompt: template='x': needs exactly one"):
        load(str(prompt_model_dir), scorer={"name": "prompt", "template": "x"})
