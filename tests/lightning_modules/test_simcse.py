"""SimCSE (lightning_modules.simcse, in_batch_losses.simcse_loss): the loss by hand and against
sentence-transformers' MultipleNegativesRankingLoss, the 2-rank gather, dropout really on, and exports that
load in SentenceTransformer as evaluated (MLP dropped with mlp=train, a Dense(Tanh) module with mlp=always)."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.multiprocessing as mp

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.lightning_modules.in_batch_losses import multiple_negatives_ranking_loss, simcse_loss
from tests.helpers import WORDS

SENTENCES = [f"{a} {b} {c} ." for a, b, c in zip(WORDS[::3], WORDS[1::3], WORDS[2::3], strict=False)]


def test_simcse_loss_by_hand():
    v1 = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    v2 = torch.tensor([[3.0, 0.0], [1.0, 1.0]])
    hard = torch.tensor([[0.0, -1.0], [-1.0, 0.0]])
    s = 1 / math.sqrt(2)
    cos = [[1.0, s, 0.0, -1.0], [0.0, s, -1.0, 0.0]]  # anchor i vs [p0, p1, h0, h1]

    def by_hand(columns: int, weight: float = 0.0, temperature: float = 0.05) -> float:
        total = 0.0
        for i in range(2):
            logits = [c / temperature for c in cos[i][:columns]]
            if columns == 4:
                logits[2 + i] += weight  # only the anchor's OWN hard negative (cl_forward's weights)
            total += -(logits[i] - math.log(sum(math.exp(v) for v in logits)))
        return total / 2

    # fp32 log-sum-exp of logits up to ~21.5: absolute rounding of a few eps x the largest logit
    tol = 8 * torch.finfo(torch.float32).eps * 21.5
    assert simcse_loss(v1, v2).item() == pytest.approx(by_hand(2), rel=1e-5, abs=tol)
    assert simcse_loss(v1, v2, temperature=0.5).item() == pytest.approx(by_hand(2, temperature=0.5), rel=1e-5, abs=tol)
    assert simcse_loss(v1, v2, hard).item() == pytest.approx(by_hand(4), rel=1e-5, abs=tol)
    assert simcse_loss(v1, v2, hard, hard_negative_weight=1.5).item() == pytest.approx(by_hand(4, 1.5), rel=1e-5, abs=tol)
    # a weight large enough to matter: anchor i's own hard negative now outscores its positive
    assert simcse_loss(v1, v2, hard, hard_negative_weight=40.0).item() == pytest.approx(by_hand(4, 40.0), rel=1e-5)
    with pytest.raises(ValueError, match="temperature"):
        simcse_loss(v1, v2, temperature=0.0)
    with pytest.raises(ValueError, match="one row per anchor"):
        simcse_loss(v1, v2, hard[:1])


def test_unsupervised_simcse_is_mnrl_at_scale_one_over_temperature():
    torch.manual_seed(0)
    v1, v2 = torch.randn(6, 8), torch.randn(6, 8)
    for t in (0.05, 0.1):
        torch.testing.assert_close(simcse_loss(v1, v2, temperature=t),
                                   multiple_negatives_ranking_loss(v1, v2, scale=1 / t))


def test_matches_sentence_transformers_mnrl_on_sentence_pairs(tiny_model_dir):
    """sentence-transformers' SimCSE recipe: MultipleNegativesRankingLoss(scale=20) on (s, s) columns."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    model = SentenceTransformer(str(tiny_model_dir), device="cpu").eval()  # eval: both sides see the same vectors
    s = SENTENCES[:6]
    with torch.no_grad():
        theirs = MultipleNegativesRankingLoss(model, scale=20.0)([model.preprocess(s), model.preprocess(s)], None)
        emb = model(model.preprocess(s))["sentence_embedding"]
        torch.testing.assert_close(simcse_loss(emb, emb, temperature=0.05), theirs, rtol=1e-5, atol=1e-6)


def _rank_grads(rank: int, world: int, init_file: str, tensors, out) -> None:
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        n = tensors[0].shape[0] // world
        parts = [t[rank * n:(rank + 1) * n].clone().requires_grad_(True) for t in tensors]
        loss = simcse_loss(*parts, hard_negative_weight=0.7)
        loss.backward()
        out[rank] = (loss.detach(), [p.grad.clone() for p in parts])
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow  # 2 spawned DDP ranks: 8-18 s on 2 shared cores
def test_two_rank_gather_gives_the_single_device_gradient(tmp_path):
    """Gathered with gradients: DDP's average of per-rank gradients equals the global batch's gradient."""
    torch.manual_seed(0)
    tensors = [torch.randn(8, 5) for _ in range(3)]
    full = [t.clone().requires_grad_(True) for t in tensors]
    single = simcse_loss(*full, hard_negative_weight=0.7)
    single.backward()
    out = mp.Manager().dict()
    mp.spawn(_rank_grads, args=(2, str(tmp_path / "init"), tensors, out), nprocs=2)
    torch.testing.assert_close((out[0][0] + out[1][0]) / 2, single.detach(), rtol=1e-5, atol=1e-6)
    for r in range(2):
        for got, want in zip(out[r][1], (t.grad[r * 4:(r + 1) * 4] for t in full), strict=True):
            torch.testing.assert_close(got / 2, want, rtol=1e-5, atol=1e-6)


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
    from tests.lightning_modules.test_grad_cache import SENTENCES, TOL, _assert_same

    module = _module(tiny_model_dir, dropout=0.0, objective=objective, mlp="always")
    module.encoder_model.train()
    batch = ({"anchors": SENTENCES[:6], "positives": SENTENCES[6:12], "negatives": SENTENCES[12:18]}
             if objective == "supervised" else {"sentences": SENTENCES[:12]})
    grads = []
    for size in (None, 5):
        module.hparams.mini_batch_size = size
        module.zero_grad(set_to_none=True)
        loss = module.training_step(batch, 0)
        loss.backward()
        grads.append((loss.detach(), {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}))
    (want_loss, want), (got_loss, got) = grads
    torch.testing.assert_close(got_loss, want_loss, rtol=TOL, atol=TOL)
    assert any("mlp" in n for n in want)
    _assert_same(got, want)  # to 256 float32 ulps of max(1, largest gradient), as the other cached losses
