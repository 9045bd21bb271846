"""Matryoshka (``EncoderModule.with_matryoshka``) on PromptBERT, DiffCSE and RankCSE (issue 41).

For each: ``matryoshka_dims=[full]`` gives the step's loss and gradients without it, and ``[full, d]`` gives the
weighted sum of the method's own loss on each truncated, re-normalised prefix, computed here from the objective
functions (the prefix cut and normalised by hand, not by ``shrink``), gradients included. A head the export drops
(SimCSE's ``mlp=train``, PromptBERT's ``head=mlp``) is refused in one line: the prefixes would be the head's.
"""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import GRADIENT_SENTENCES, WORDS, assert_same_gradients

FULL, SMALL = 32, 8  # the tiny BERT's hidden size, and a prefix
WEIGHTS = (1.0, 0.5)
SENTENCES = [f"{a} {b} {c} ." for a, b, c in zip(WORDS[::3], WORDS[1::3], WORDS[2::3], strict=False)]
TEMPLATES = {"template": "the [X] is [MASK] .", "template2": "a [X] is [MASK] ."}  # words of the tiny vocabulary


def prefix(x: torch.Tensor, dim: int) -> torch.Tensor:
    return x[:, :dim] / x[:, :dim].norm(dim=-1, keepdim=True)


def weighted(loss_at) -> torch.Tensor:
    """``sum_k w_k loss_at(d_k)`` over ``(FULL, SMALL)``."""
    return sum(w * loss_at(d) for d, w in zip((FULL, SMALL), WEIGHTS, strict=True))


def grads(module, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    params = {n: p for n, p in module.named_parameters() if p.requires_grad}
    got = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
    return {n: g for n, g in zip(params, got, strict=True) if g is not None}


def assert_same(got: tuple, want: tuple) -> None:
    """``(loss, grads)`` pairs equal: the loss to float32's default tolerance, every gradient to ``GRADIENT_TOL`` of
    the largest entry. Why scaled: PromptBERT's supervised gradients reach ~200, where a fixed 3e-5 is a few fp32 ulps
    and the summation order of an AVX-512 kernel differs from an AVX2 one by that much (it failed on AVX-512 only)."""
    torch.testing.assert_close(got[0], want[0])
    assert any("encoder_model" in n for n in got[1])
    assert_same_gradients(got[1], want[1])


def stepped(module, run, seed: int = 3) -> tuple[torch.Tensor, dict]:
    """``run(module)``'s loss and gradients, from ``seed`` (the same dropout masks, ListMLE shuffles, ...)."""
    torch.manual_seed(seed)
    loss = run(module)
    return loss.detach(), grads(module, loss)


def check_method(make, step, reference) -> None:
    """``[FULL]`` equals no Matryoshka; ``[FULL, SMALL]`` equals ``reference(module)``, the weighted prefix losses."""
    assert_same(stepped(make(matryoshka_dims=[FULL]), step), stepped(make(), step))
    module = make(matryoshka_dims=[FULL, SMALL], matryoshka_weights=list(WEIGHTS))
    assert_same(stepped(module, step), stepped(module, reference))


# ------------------------------------------------------------------------------------------------ PromptBERT
def _promptbert(model_dir, **kwargs):
    from sts_lightning.lightning_modules.promptbert import PromptBERTModule

    torch.manual_seed(0)  # the head's initial weights
    module = PromptBERTModule(str(model_dir), max_length=32, eval_batch_size=4, **{**TEMPLATES, **kwargs})
    module.log = lambda *args, **kw: None
    return module


PROMPT_OPTIONS = {"unsupervised": {"head": "none"},
                  "supervised": {"objective": "supervised", "head": "transform", "eval_denoise": True,
                                 "template2": None, "hard_negative_weight": 0.5}}


@pytest.mark.parametrize("objective", list(PROMPT_OPTIONS))
def test_promptbert_infonce_on_each_prefix(tiny_model_dir, objective, one_thread):
    from sts_lightning.embeddings.methods.promptbert.objective import promptbert_loss

    batch = {"anchors": SENTENCES[:4], "positives": SENTENCES[4:8], "negatives": SENTENCES[8:12]} \
        if objective == "supervised" else {"sentences": SENTENCES[:4]}

    def reference(module):
        views, hp = module.training_views(batch), module.hparams
        return weighted(lambda d: promptbert_loss([prefix(v, d) for v in views], hp.temperature, hp.hard_negative_weight))

    check_method(lambda **kw: _promptbert(tiny_model_dir, **PROMPT_OPTIONS[objective], **kw),
                 lambda module: module.training_step(batch, 0), reference)


# ------------------------------------------------------------------------------------------------ DiffCSE
def _diffcse(model_dir, **kwargs):
    from sts_lightning.lightning_modules.diffcse import DiffCSEModule

    torch.manual_seed(0)  # the discriminator's head
    module = DiffCSEModule(str(model_dir), generator=f"{model_dir}-mlm", eval_batch_size=4, mlp="none", **kwargs)
    module.log = lambda *args, **kw: None
    return module


def test_diffcse_infonce_on_each_prefix_rtd_once_on_the_full_vector(tiny_model_dir, one_thread):
    """The RTD term's discriminator reads the whole vector as its [CLS] input: one term, the full vector's."""
    from sts_lightning.embeddings.methods.diffcse.objective import edit_tokens, rtd_loss
    from sts_lightning.embeddings.methods.mlm.objective import mask_rows
    from sts_lightning.embeddings.methods.simcse.objective import simcse_loss

    batch = {"sentences": GRADIENT_SENTENCES[:6]}

    def reference(module):  # diffcse_losses written out: views, generator edit, discriminator on the full vector
        ids = module.training_ids(batch)
        rows = module.rows(ids)
        masked, _ = mask_rows(module.collator, rows, module.mask_seed_generator(0))
        emb = module.embed_ids(ids)
        with torch.no_grad():
            predicted = module.generator(input_ids=masked, attention_mask=rows.attention_mask).logits.argmax(-1)
        edited, replaced = edit_tokens(predicted, rows.input_ids, rows.attention_mask,
                                       int(module.encoder.tokenizer.cls_token_id))
        logits = module.discriminator(edited, rows.attention_mask, emb)
        v1, v2 = emb.chunk(2)
        hp = module.hparams
        return weighted(lambda d: simcse_loss(prefix(v1, d), prefix(v2, d), temperature=hp.temperature)) + \
            hp.lambda_weight * rtd_loss(logits, replaced)

    check_method(lambda **kw: _diffcse(tiny_model_dir, lambda_weight=0.5, **kw),
                 lambda module: module.training_step(batch, 0), reference)


# ------------------------------------------------------------------------------------------------ RankCSE
@pytest.mark.parametrize("ranking_loss", ["listnet", "listmle"])
def test_rankcse_whole_loss_on_each_prefix(tiny_model_dir, ranking_loss, one_thread):
    """InfoNCE, consistency and ranking distillation all read the prefix's cosines; the teachers' lists stay."""
    from sts_lightning.embeddings.methods.rankcse.objective import rankcse_loss, teacher_scores
    from sts_lightning.lightning_modules.rankcse import RankCSEModule

    torch.manual_seed(1)
    teachers = [torch.randn(6, 8), torch.randn(6, 5)]
    batch = {"sentences": GRADIENT_SENTENCES[:6], "teachers": teachers}

    def make(**kw):
        torch.manual_seed(0)
        module = RankCSEModule(str(tiny_model_dir), teacher_weights=[1.0, 3.0], max_length=32, mlp="none",
                               ranking_loss=ranking_loss, **kw)
        module.log = lambda *args, **k: None
        return module

    def reference(module):
        module.encoder_model.train()
        v1, v2 = module.embed_ids(module.training_ids(batch)).chunk(2)
        listed = teacher_scores(teachers, [0.25, 0.75], 0.05)
        return weighted(lambda d: rankcse_loss(prefix(v1, d), prefix(v2, d), listed, ranking_loss=ranking_loss)["loss"])

    check_method(make, lambda module: module.training_step(batch, 0), reference)


# ------------------------------------------------------------------------------------- refused: a training-only head
@pytest.mark.parametrize(("module", "options", "key"), [
    ("simcse:SimCSEModule", {}, "model.mlp=train"),
    ("diffcse:DiffCSEModule", {"generator": "{mlm}"}, "model.mlp=train"),
    ("rankcse:RankCSEModule", {}, "model.mlp=train"),
    ("promptbert:PromptBERTModule", {}, "model.head=mlp"),
])
def test_a_head_the_export_drops_refuses_matryoshka_before_the_model_loads(module, options, key, tiny_model_dir):
    import importlib

    name, cls = module.split(":")
    klass = getattr(importlib.import_module(f"sts_lightning.lightning_modules.{name}"), cls)
    with pytest.raises(ConfigError) as caught:
        klass("/nonexistent/model", matryoshka_dims=[16], **{k: v.format(mlm=f"{tiny_model_dir}-mlm")
                                                              for k, v in options.items()})  # the path would fail next: checked first
    assert str(caught.value).startswith(f"model.matryoshka_dims with {key}: that head is used in training only")


# ------------------------------------------------------------------------------------------------ the export
@pytest.mark.parametrize("name", ["promptbert", "diffcse", "rankcse", "simcse"])
def test_the_export_note_and_card_name_the_trained_prefixes(name, tiny_model_dir, tmp_path):
    """As every one-vector method's: the note and the card say which prefixes were trained and how to load one;
    the evaluate.py line stays the evaluated one (the Python API reads it)."""
    import importlib

    from sts_lightning.embeddings.io.export_note import read_loading_command

    cls = {"promptbert": "PromptBERTModule", "diffcse": "DiffCSEModule", "rankcse": "RankCSEModule",
           "simcse": "SimCSEModule"}[name]
    options = {"promptbert": {**TEMPLATES, "head": "none"}, "diffcse": {"generator": f"{tiny_model_dir}-mlm"}}.get(name, {})
    options = {"mlp": "none", **options} if name != "promptbert" else options
    klass = getattr(importlib.import_module(f"sts_lightning.lightning_modules.{name}"), cls)
    module = klass(str(tiny_model_dir), max_length=32, matryoshka_dims=[FULL, 16, SMALL], **options)
    folder = module.export(tmp_path / "export")
    for text in ((folder / "LOADING.md").read_text(), (folder / "README.md").read_text()):
        assert "Trained with Matryoshka (model.matryoshka_dims=[32, 16, 8]): the first 16,8 numbers" in text
        assert 'sts_lightning.load("<export>", dim=8)' in text and "'dims=[16,8]'" in text
    _, _, extra = read_loading_command(folder)
    assert not any(arg.startswith("dims=") for arg in extra)
