"""PromptBERT's training objective (embeddings.methods.promptbert.objective, through ``PromptBERTModule``'s views)
against the authors' ``cl_forward``: same loss to 1e-5 and the same gradients on every parameter.

The oracle re-implements kongds/Prompt-BERT at 690ba6ef3a1d954c24d9a992ff8e339816866a05: ``train.py``'s template
split and ``prepare_features`` (``bs + encode(s)[:max_seq_length] + es``, padded by their collator) and
``prompt_bert/models.py``'s ``cl_forward`` with ``get_delta`` (50 template rows, positions after ``len(bs) + 1``
shifted by the row): the unsupervised recipe (``run.sh unsup-bert``: two templates, ``--mask_embedding_sentence_delta``,
``MLPLayer`` after denoising) and the supervised one (``run.sh sup-bert``: one template, NLI triplets, ``--mask_
embedding_sentence_org_mlp``: ``BertPredictionHeadTransform`` on both states before subtracting). Dropout is off
(eval mode) on both sides, so the two computations see the same numbers. Their single-GPU path (no all_gather).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from sts_lightning.embeddings.methods.promptbert.objective import prompt_vectors, promptbert_loss
from tests.helpers import assert_same_gradients

T1, T2 = '*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*', '*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*'
OURS = {T1: 'This sentence of "[X]" means[MASK].', T2: 'This sentence : "[X]" means[MASK].'}
SENTENCES = ["a man plays a guitar", "two children kick a ball", "is the dog running ?", "a cat",
             "the woman cuts an onion in the kitchen and the man cooks food on the street", "a girl rides a horse"]
POSITIVES = ["a man plays music", "children play", "a dog runs", "an animal", "people cook", "a girl rides"]
NEGATIVES = ["nobody plays", "a dog sleeps", "the cat sits", "a car", "a child reads a book", "the boy walks"]
MAX_SEQ_LENGTH = 8  # cuts the long sentence: truncation is part of what is compared
LOSS_TOL = 1e-5


def _split(tokenizer, template):
    parts = template.replace("*mask*", tokenizer.mask_token).replace("*sep+*", "").replace("*cls*", "") \
        .replace("*sent_0*", " ").split(" ")
    return parts[0].replace("_", " "), parts[1].replace("_", " ")


def their_loss(bert, mlp, tokenizer, columns, templates, org_mlp: bool, temp: float = 0.05):
    """``cl_forward`` (their ``--mask_embedding_sentence --mask_embedding_sentence_delta`` path)."""
    total, num_sent = len(columns[0]), len(columns)
    bs_str, es_str = _split(tokenizer, templates[0])
    bs2_str, es2_str = _split(tokenizer, templates[-1]) if len(templates) == 2 else (bs_str, es_str)
    bs, es = tokenizer.encode(bs_str)[:-1], tokenizer.encode(es_str)[1:]
    bs2, es2 = tokenizer.encode(bs2_str)[:-1], tokenizer.encode(es2_str)[1:]
    flat = [a + tokenizer.encode(s, add_special_tokens=False)[:MAX_SEQ_LENGTH] + b
            for col, (a, b) in zip(columns, [(bs, es)] + [(bs2, es2)] * (num_sent - 1), strict=True) for s in col]
    width = max(len(x) for x in flat)
    ids = torch.tensor([x + [tokenizer.pad_token_id] * (width - len(x)) for x in flat])
    mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in flat])
    order = torch.arange(total * num_sent).view(num_sent, total).t().reshape(-1)  # (bs, num_sent) rows, flattened
    ids, mask = ids[order], mask[order]
    cls_bs = tokenizer.encode(bs_str, add_special_tokens=False)

    def get_delta(template_token, length=50):
        d_ids = torch.tensor(template_token).repeat(length, 1)
        d_pos = torch.arange(d_ids.shape[1]).unsqueeze(0).repeat(length, 1)
        d_pos[:, len(cls_bs) + 1:] += torch.arange(length).unsqueeze(-1)
        last = bert(input_ids=d_ids, position_ids=d_pos, output_hidden_states=True, return_dict=True).last_hidden_state
        delta = last[d_ids == tokenizer.mask_token_id]
        return (mlp(delta) if org_mlp else delta), d_ids.shape[1]

    delta, template_len = get_delta(tokenizer.encode(bs_str + es_str))
    if len(templates) == 2:
        delta1, template_len1 = get_delta(tokenizer.encode(bs2_str + es2_str))
    last = bert(ids, attention_mask=mask, token_type_ids=None, return_dict=True).last_hidden_state
    pooler = last[ids == tokenizer.mask_token_id]
    if org_mlp:
        pooler = mlp(pooler)
    if len(templates) == 2:
        pooler = pooler.view(total, num_sent, -1)
        m = mask.view(total, num_sent, -1)
        blen = m.sum(-1) - template_len
        pooler[:, 0, :] -= delta[blen[:, 0]]
        blen = m.sum(-1) - template_len1
        pooler[:, 1, :] -= delta1[blen[:, 1]]
        if num_sent == 3:
            pooler[:, 2, :] -= delta1[blen[:, 2]]
    else:
        pooler = pooler - delta[mask.sum(-1) - template_len]
    pooler = pooler.reshape(total, num_sent, -1)
    if not org_mlp:
        pooler = mlp(pooler)
    z1, z2 = pooler[:, 0], pooler[:, 1]
    cos = F.cosine_similarity(z1.unsqueeze(1), z2.unsqueeze(0), dim=-1) / temp
    if num_sent == 3:
        cos = torch.cat([cos, F.cosine_similarity(z1.unsqueeze(1), pooler[:, 2].unsqueeze(0), dim=-1) / temp], 1)
    return F.cross_entropy(cos, torch.arange(total))


def _grads(module) -> dict:
    return {k: p.grad.clone() for k, p in module.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("recipe", ["unsupervised", "supervised"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_loss_and_gradients_are_the_authors(prompt_model_dir, recipe, dtype, one_thread):
    """The loss to 1e-5 in float32 (what training runs in) and in float64; the gradients in float64.

    Why gradients in float64: a denoised vector is the difference of two close states (the sentence's [MASK] and
    the template's), and through the supervised LayerNorm head and 1/0.05 that cancellation magnifies rounding:
    in float32 the two computations' different batch shapes (their one padded pass of every view, ours one pass
    per template) give gradients of size ~19 that differ by ~2e-4 relative, in float64 by ~1e-13.
    """
    from sts_lightning.lightning_modules.promptbert import PromptBERTModule

    supervised = recipe == "supervised"
    templates = (T1,) if supervised else (T1, T2)
    options = dict(objective="supervised", template2=None, head="transform") if supervised else \
        dict(template2=OURS[T2])
    torch.manual_seed(0)
    module = PromptBERTModule(str(prompt_model_dir), template=OURS[T1], max_length=MAX_SEQ_LENGTH,
                              **options).eval().to(dtype)  # eval: dropout off on both sides
    oracle = copy.deepcopy(module)
    batch = {"anchors": SENTENCES, "positives": POSITIVES, "negatives": NEGATIVES} if supervised \
        else {"sentences": SENTENCES}
    ours = promptbert_loss(module.training_views(batch))
    columns = [SENTENCES, POSITIVES, NEGATIVES] if supervised else [SENTENCES, SENTENCES]
    theirs = their_loss(oracle.encoder_model, oracle.head, module.encoder.tokenizer, columns, templates, supervised)
    assert ours.dtype == theirs.dtype == dtype
    assert ours.item() == pytest.approx(theirs.item(), abs=LOSS_TOL)
    assert ours.item() > 1e-3  # not a degenerate batch (eval mode: the two views of a sentence are close)
    if dtype == torch.float64:
        ours.backward()
        theirs.backward()
        got, want = _grads(module), _grads(oracle)
        assert "head.0.weight" in got and any(k.startswith("encoder_model.embeddings") for k in got)
        assert_same_gradients(got, want)


def test_prompt_vectors_by_hand():
    states, noise = torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[0.5, 0.5], [1.0, 0.0], [2.0, 2.0]])
    rows = torch.tensor([2, 0])
    torch.testing.assert_close(prompt_vectors(states, noise, rows), torch.tensor([[-1.0, 0.0], [2.5, 3.5]]))
    double = torch.nn.Linear(2, 2, bias=False)
    torch.nn.init.eye_(double.weight)
    double.weight.data *= 2
    torch.testing.assert_close(prompt_vectors(states, noise, rows, double), 2 * torch.tensor([[-1.0, 0.0], [2.5, 3.5]]))
    square = lambda x: x ** 2  # noqa: E731  (a head where before / after subtracting differ)
    torch.testing.assert_close(prompt_vectors(states, noise, rows, square, head_first=True),
                               states ** 2 - noise[rows] ** 2)
    with pytest.raises(ValueError, match="2 views"):
        promptbert_loss([states])
