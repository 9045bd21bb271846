"""Meta-embeddings: closed forms recover a known shared signal, the AE's J^2 loss terms, export round-trip."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.methods.meta.cross_view_ae_nets import CrossViewAutoencoder
from sts_lightning.embeddings.methods.meta.projections import MetaProjection, average, concatenate, fit_meta


def shared_signal_views(n: int = 3000, k: int = 3, dims=(20, 12, 8), seed: int = 0):
    """Views x_j = z A_j + strong private noise P_j + iid noise: only z is common to all views."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g)
    views = []
    for dj in dims:
        a = torch.randn(k, dj, generator=g)
        private = torch.randn(n, 4, generator=g) @ (3.0 * torch.randn(4, dj, generator=g))
        views.append(z @ a + private + 0.3 * torch.randn(n, dj, generator=g) + 5.0)
    return z, views


def explained(target: torch.Tensor, features: torch.Tensor) -> float:
    """R^2 of the least-squares fit of target from features (with intercept), averaged over target columns."""
    x = torch.cat([features.double(), torch.ones(len(features), 1, dtype=torch.float64)], 1)
    coef = torch.linalg.lstsq(x, target.double()).solution
    resid = target.double() - x @ coef
    return float(1 - resid.var(0).sum() / target.double().var(0).sum())


def test_gcca_recovers_the_shared_signal_and_ignores_private_structure():
    z, views = shared_signal_views()
    proj = fit_meta("gcca", views, d=3, tau=0.01)
    out = proj.apply(views)
    assert out.shape == (3000, 3)
    assert explained(z, out) > 0.97  # the 3 top canonical directions span z
    # each view's own projection agrees with the others' (they are all estimates of z)
    parts = [(v - proj.tensors[f"mean_{j}"]) @ proj.tensors[f"theta_{j}"] for j, v in enumerate(views)]
    agree = torch.tensor([float(F.cosine_similarity(parts[0][:, c], p[:, c], dim=0)) for p in parts[1:] for c in range(3)])
    assert agree.mean() > 0.85 and agree.min() > 0.5
    # SVD of the same views is dominated by the (larger) private variance: it does much worse on z
    assert explained(z, fit_meta("svd", views, d=3).apply(views)) < explained(z, out) - 0.2


def test_svd_recovers_a_low_rank_subspace():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(2000, 2, generator=g)
    views = [z @ torch.randn(2, d, generator=g) + 0.01 * torch.randn(2000, d, generator=g) for d in (10, 6)]
    proj = fit_meta("svd", views, d=2)
    conc = concatenate(views)
    assert explained(conc, proj.apply(views)) > 0.99  # two components explain the rank-2 concatenation
    comps = proj.tensors["components"]
    assert torch.allclose(comps.T @ comps, torch.eye(2), atol=1e-4)  # orthonormal
    assert torch.allclose(proj.apply(views).mean(0), torch.zeros(2), atol=1e-4)  # centred on the fitting data


def test_naive_methods_normalise_and_zero_pad():
    a, b = torch.tensor([[3.0, 4.0, 0.0]]), torch.tensor([[0.0, 2.0]])
    assert torch.allclose(concatenate([a, b]), torch.tensor([[0.6, 0.8, 0.0, 0.0, 1.0]]))
    assert torch.allclose(average([a, b]), torch.tensor([[0.3, 0.9, 0.0]]))
    assert fit_meta("avg", [a, b]).output_dim == 3 and fit_meta("conc", [a, b]).output_dim == 5


def test_meta_errors_are_clear():
    views = [torch.randn(10, 4), torch.randn(9, 3)]
    with pytest.raises(DataError, match="different numbers of rows"):
        fit_meta("gcca", views)
    with pytest.raises(ConfigError, match="unknown meta-embedding"):
        fit_meta("pca", [torch.randn(10, 4)])
    with pytest.raises(ConfigError, match="d=99"):
        fit_meta("gcca", [torch.randn(10, 4), torch.randn(10, 3)], d=99)
    proj = fit_meta("conc", [torch.randn(10, 4), torch.randn(10, 3)])
    with pytest.raises(ConfigError, match="expects"):
        proj.apply([torch.randn(2, 4), torch.randn(2, 5)])
    with pytest.raises(DataError, match="non-finite"):
        proj.apply([torch.full((2, 4), math.nan), torch.randn(2, 3)])


# ------------------------------------------------------------------------------------- cross-view AE


def test_cross_view_loss_has_all_j_squared_terms():
    torch.manual_seed(0)
    ae = CrossViewAutoencoder([4, 3, 2], d=5, normalize=False)
    views = [torch.randn(6, 4), torch.randn(6, 3), torch.randn(6, 2)]
    terms = ae.loss_terms(views, "mse")
    assert terms.shape == (3, 3)
    for j in range(3):
        for k in range(3):
            by_hand = F.mse_loss(ae.decoders[k](ae.encoders[j](views[j])), views[k])
            assert terms[j, k].item() == pytest.approx(by_hand.item(), rel=1e-6)
    assert ae.loss(views, "mse").item() == pytest.approx(terms.sum().item(), rel=1e-6)
    assert torch.allclose(ae.embed(views), sum(e(v) for e, v in zip(ae.encoders, views, strict=True)))


def test_cross_view_ae_learns_a_shared_code(one_thread):
    from sts_lightning.lightning_modules.cross_view_ae import fit_cross_view_ae

    z, views = shared_signal_views(n=1000, dims=(8, 6))
    views = [v - v.mean(0) for v in views]
    untrained = CrossViewAutoencoder([8, 6], d=3)
    before = untrained.loss(views).item()
    proj = fit_cross_view_ae(views, d=3, epochs=60, batch_size=250, lr=1e-2, seed=0)
    assert proj.autoencoder.loss(views).item() < 0.8 * before
    assert proj.apply(views).shape == (1000, 3)


# ------------------------------------------------------------------------------- export round-trip
@pytest.fixture(scope="module")
def second_tiny_model_dir(tmp_path_factory, tiny_model_dir):
    """Another tiny BERT with a DIFFERENT hidden size (16), same vocabulary."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path = tmp_path_factory.mktemp("tiny_bert16")
    torch.manual_seed(1)
    tokenizer = BertTokenizerFast.from_pretrained(str(tiny_model_dir))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.parametrize("method", ["conc", "avg", "svd", "gcca", "ae"])
def test_meta_of_two_tiny_encoders_fits_saves_reloads_and_scores_identically(
        method, tmp_path, tiny_model_dir, second_tiny_model_dir, one_thread):
    from sts_lightning.embeddings.methods.meta.scorer import save_meta_embedding
    from sts_lightning.embeddings.scoring.registry import build_scorer
    from sts_lightning.embeddings.sources.build import build_source, load_meta_scorer
    from sts_lightning.lightning_modules.cross_view_ae import fit_cross_view_ae
    from tests.helpers import WORDS

    specs = [{"model": str(tiny_model_dir), "pooling": "mean"}, {"model": str(second_tiny_model_dir)}]
    sources = [build_source(s) for s in specs]
    rng = np.random.default_rng(0)
    corpus = [" ".join(rng.choice(WORDS, size=6)) for _ in range(80)]
    views = [s.embed(corpus) for s in sources]
    if method == "ae":
        projection = fit_cross_view_ae(views, d=8, epochs=3, batch_size=40)
    else:
        projection = fit_meta(method, views, d=8, tau=0.5)
    assert isinstance(projection, MetaProjection)
    from sts_lightning.embeddings.methods.meta.scorer import MetaEmbeddingScorer

    scorer = MetaEmbeddingScorer(sources, projection)
    save_meta_embedding(tmp_path / "meta", projection, specs)
    reloaded = load_meta_scorer(tmp_path / "meta")
    s1, s2 = ["a man plays a guitar .", "a dog runs ."], ["a man plays the piano .", "a cat eats food ."]
    assert torch.allclose(scorer.score_pairs(s1, s2), reloaded.score_pairs(s1, s2), atol=1e-6)
    via_registry = build_scorer({"name": "meta", "path": str(tmp_path / "meta")}, None)
    assert torch.allclose(via_registry.score_pairs(s1, s2), reloaded.score_pairs(s1, s2), atol=1e-6)
    # a meta export is itself a source (a SED teacher): same vectors
    teacher = build_source({"model": str(tmp_path / "meta")})
    assert teacher.dim == projection.output_dim
    assert torch.allclose(teacher.embed(s1), scorer.represent(s1)["embedding"], atol=1e-6)


def test_scorers_that_need_an_encoder_refuse_none():
    from sts_lightning.embeddings.scoring.registry import build_scorer

    with pytest.raises(ConfigError, match="needs an encoder"):
        build_scorer("mean", None)


def test_meta_fit_cli_exports_a_loadable_meta_embedding(tmp_path, tiny_model_dir, train_data_dir, one_thread):  # noqa: F811
    import argparse

    from sts_lightning.embeddings.sources.build import load_meta_scorer
    from sts_lightning.fit_meta import fit_and_export

    args = argparse.Namespace(method="gcca", sources=str(tiny_model_dir),
                              files="wiki/wiki_sentences_100k.txt", data_dir=str(train_data_dir),
                              cache_dir=str(tmp_path / "cache"), max_sentences=None, max_words=59, d=None, tau=1.0,
                              loss="mse", hidden_layers=0, epochs=1, batch_size=16, seed=0, out=str(tmp_path / "m"),
                              align_to=str(tiny_model_dir), align_mean=True)
    projection = fit_and_export(args)
    assert projection.output_dim == 32 and {"align_rotation", "align_offset"} <= set(projection.tensors)
    scorer = load_meta_scorer(tmp_path / "m")
    assert scorer.represent(["a man plays a guitar ."])["embedding"].shape == (1, 32)
    assert scorer.projection.options["align_scale"] == pytest.approx(projection.options["align_scale"])
    with pytest.raises(ConfigError, match="--align-to"):
        fit_and_export(argparse.Namespace(**{**vars(args), "align_to": None}))


def test_procrustes_alignment_keeps_cosines_and_lands_on_the_target():
    z, views = shared_signal_views(n=500, dims=(10, 6))
    proj = fit_meta("gcca", views, d=6, tau=0.1)
    before = proj.apply(views)
    q, _ = torch.linalg.qr(torch.randn(6, 6, generator=torch.Generator().manual_seed(3)))
    target = 2.5 * before @ q  # the same space, rotated and scaled
    proj.align_to(views, target)
    after = proj.apply(views)
    assert torch.allclose(F.cosine_similarity(before[:-1], before[1:]), F.cosine_similarity(after[:-1], after[1:]),
                          atol=1e-4)
    assert torch.allclose(after, target, atol=1e-3) and proj.options["align_scale"] == pytest.approx(2.5, rel=1e-4)
    with pytest.raises(ConfigError, match="align_to"):
        proj.align_to(views, target[:, :3])


def test_alignment_with_the_target_mean_lands_on_a_shifted_target_and_saves(tmp_path):
    """``add_target_mean``: a target = rotated, scaled meta-embedding + a constant (a transformer's common
    component) is hit exactly; the plain rotation cannot produce the constant. The offset survives export."""
    from sts_lightning.embeddings.methods.meta.scorer import load_meta_export, save_meta_embedding

    z, views = shared_signal_views(n=500, dims=(10, 6))
    proj = fit_meta("gcca", views, d=6, tau=0.1)
    before = proj.apply(views)
    q, _ = torch.linalg.qr(torch.randn(6, 6, generator=torch.Generator().manual_seed(4)))
    mean = torch.linspace(1.0, 3.0, 6)
    target = 0.5 * before @ q + mean
    plain_error = ((proj.align_to(views, target).apply(views) - target) ** 2).mean()
    proj.align_to(views, target, add_target_mean=True)
    after = proj.apply(views)
    assert torch.allclose(after, target, atol=1e-3) and plain_error > 0.1
    assert torch.allclose(proj.tensors["align_offset"], mean, atol=1e-3)
    save_meta_embedding(tmp_path / "m", proj, [{"model": "a"}, {"model": "b"}])
    assert torch.allclose(load_meta_export(tmp_path / "m").projection.apply(views), after)
    proj.align_to(views, target)  # re-aligned without the mean: the old offset is dropped
    assert "align_offset" not in proj.tensors
