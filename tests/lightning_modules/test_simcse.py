"""SimCSE (lightning_modules.simcse): dropout really on, and exports that load in SentenceTransformer as evaluated
(MLP dropped with mlp=train, a Dense(Tanh) module with mlp=always). The loss: tests/embeddings/methods/simcse/."""

from __future__ import annotations

import json

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import GRADIENT_SENTENCES, GRADIENT_TOL, WORDS, assert_same_gradients

SENTENCES = [f"{a} {b} {c} ." for a, b, c in zip(WORDS[::3], WORDS[1::3], WORDS[2::3], strict=False)]


def _module(model_dir, **kwargs):
    from sts_lightning.lightning_modules.simcse import SimCSEModule

    module = SimCSEModule(str(model_dir), max_length=32, eval_batch_size=4, **kwargs)
    module.log = lambda *args, **kw: None  # no trainer attached
    return module


def test_dropout_is_really_on_while_training(tiny_model_dir, one_thread):
    module = _module(tiny_model_dir, dropout=0.2)
    model = module.encoder_model
    drops = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert drops and all(m.p == 0.2 for m in drops)
    assert model.config.hidden_dropout_prob == model.config.attention_probs_dropout_prob == 0.2
    module.eval()  # e.g. after a validation: training_step must switch dropout back on
    batch = {"sentences": SENTENCES[:4]}
    texts = module.training_texts(batch)
    assert texts == [*SENTENCES[:4], *SENTENCES[:4]]
    loss = module.training_step(batch, 0)
    assert model.training and loss.item() > 0
    emb = module.embed(texts)
    assert not torch.allclose(emb[:4], emb[4:])  # two views of each sentence differ (dropout masks)
    module.eval()
    with torch.no_grad():  # and without dropout they agree
        emb = module.embed(texts)
    torch.testing.assert_close(emb[:4], emb[4:], rtol=0, atol=1e-5)


def test_no_dropout_gives_identical_views(tiny_model_dir, one_thread):
    module = _module(tiny_model_dir, dropout=0.0).train()
    with torch.no_grad():
        emb = module.embed(module.training_texts({"sentences": SENTENCES[:3]}))
    torch.testing.assert_close(emb[:3], emb[3:], rtol=0, atol=1e-5)


def test_supervised_texts_and_hard_negatives(tiny_model_dir, one_thread):
    module = _module(tiny_model_dir, objective="supervised", mlp="always", hard_negative_weight=0.5)
    batch = {"anchors": SENTENCES[:3], "positives": SENTENCES[3:6], "negatives": SENTENCES[6:9]}
    assert module.training_texts(batch) == SENTENCES[:9]
    assert torch.isfinite(module.training_step(batch, 0))
    with pytest.raises(ConfigError, match=r"model.objective=supervised needs NLI triplets .*data.format"):
        module.training_texts({"sentences": SENTENCES[:3]})
    unsup = _module(tiny_model_dir)
    with pytest.raises(ConfigError, match=r"model.objective=unsupervised needs plain sentences"):
        unsup.training_texts(batch)
    assert module.method_info.key == "simcse_sup" and unsup.method_info.key == "simcse"


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"temperature": 0.0}, "model.temperature"), ({"temperature": -0.05}, "model.temperature"),
    ({"mlp": "sometimes"}, "model.mlp"), ({"objective": "semi"}, "model.objective"),
    ({"pooling": "nope"}, "pooling"), ({"dropout": 1.0}, "model.dropout"),
    ({"hard_negative_weight": 1.0}, "model.hard_negative_weight"),
])
def test_bad_values_are_one_line_config_errors(kwargs, key, tiny_model_dir):
    with pytest.raises(ConfigError) as err:
        _module(tiny_model_dir, **kwargs)
    assert key in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("mlp", ["train", "always", "none"])
def test_export_loads_in_sentence_transformers_as_evaluated(mlp, tiny_model_dir, tmp_path, one_thread):
    from sentence_transformers import SentenceTransformer

    module = _module(tiny_model_dir, objective="supervised" if mlp == "always" else "unsupervised", mlp=mlp)
    with torch.no_grad():
        if module.mlp is not None:  # a head that is not the identity-ish init, so dropping it would show
            module.mlp[0].weight.normal_(std=0.5)
            module.mlp[0].bias.normal_(std=0.5)
        module.eval()
        evaluated = module.scorer().represent(SENTENCES)["embedding"]
        cls = module.encoder.encode(SENTENCES, lambda b: b.hidden_states[-1][:, 0])
    assert (module.mlp is not None) == (mlp != "none")
    if mlp == "always":
        torch.testing.assert_close(evaluated, torch.tanh(cls @ module.mlp[0].weight.T + module.mlp[0].bias))
    else:  # the unsupervised recipe evaluates [CLS] before the MLP
        torch.testing.assert_close(evaluated, cls)
    folder = module.export(tmp_path / "export")
    kinds = [m["type"].rsplit(".", 1)[-1] for m in json.loads((folder / "modules.json").read_text())]
    assert kinds == (["Transformer", "Pooling", "Dense"] if mlp == "always" else ["Transformer", "Pooling"])
    vectors = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    torch.testing.assert_close(vectors.cpu(), evaluated, atol=1e-5, rtol=0)
    note = (folder / "LOADING.md").read_text()
    assert ("simcse_mlp" in note) == (mlp == "always")
    assert ("training only" in note) == (mlp == "train")


@pytest.mark.parametrize("objective", ["unsupervised", "supervised"])
def test_cached_loss_gives_the_uncached_gradients_through_the_mlp(objective, tiny_model_dir, one_thread):
    """``model.mini_batch_size`` (GradCache): same loss and gradients as one pass, the MLP head included.

    Dropout off so both paths draw no masks (the replay of dropout is tested in test_grad_cache.py)."""
    module = _module(tiny_model_dir, dropout=0.0, objective=objective, mlp="always")
    module.encoder_model.train()
    texts = GRADIENT_SENTENCES
    batch = ({"anchors": texts[:6], "positives": texts[6:12], "negatives": texts[12:18]}
             if objective == "supervised" else {"sentences": texts[:12]})
    grads = []
    for size in (None, 5):
        module.hparams.mini_batch_size = size
        module.zero_grad(set_to_none=True)
        loss = module.training_step(batch, 0)
        loss.backward()
        grads.append((loss.detach(), {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}))
    (want_loss, want), (got_loss, got) = grads
    torch.testing.assert_close(got_loss, want_loss, rtol=GRADIENT_TOL, atol=GRADIENT_TOL)
    assert any("mlp" in n for n in want)
    assert_same_gradients(got, want)  # to 256 float32 ulps of max(1, largest gradient), as the other cached losses
