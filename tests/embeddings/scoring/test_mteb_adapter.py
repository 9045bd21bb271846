"""The MTEB adapter: mteb's own STS evaluator on a local task gives exactly ``evaluate.py``'s Spearman.

Offline: the tasks are the tiny fixture files turned into mteb tasks (``sts.mteb_tasks``), mteb writes its result
files under ``tmp_path`` and nothing is downloaded. Covered: a pooling scorer (cosine: mteb's main score is ours
too), Sen2Pro (a call-dependent, non-cosine scorer: its number is mteb's ``spearman``) and a Latte-Mix normal
latent (a representation of per-token tensors and a bool mask, packed into one row per sentence).
"""

from __future__ import annotations

import mteb  # the [test] extra: its own STS evaluator is the reference here
import pytest
import torch

from sts_lightning.embeddings.methods.latte_mix.scorer import LatteMixScorer
from sts_lightning.embeddings.scoring.mteb_adapter import (
    MTEBScorerModel,
    layout_of,
    model_name,
    pack,
    scores_by_cosine,
    unpack,
)
from sts_lightning.embeddings.scoring.registry import build_scorer
from sts_lightning.sts.mteb_tasks import mteb_sts_task, task_sentences
from sts_lightning.sts.scoring import score_tasks
from sts_lightning.sts.tasks import load_task
from tests.helpers import TinyPosterior

TASKS = ["stsb-dev", "STS12", "sick-trial"]  # an MTEB name among ours: evaluate.py accepts both


def _mteb_scores(model: MTEBScorerModel, tasks, tmp_path) -> dict[str, dict]:
    result = mteb.evaluate(model, [mteb_sts_task(t) for t in tasks], cache=mteb.ResultCache(cache_path=tmp_path),
                           overwrite_strategy="always", show_progress_bar=False)
    return {r.task_name: r.scores["test"][0] for r in result.task_results}


def _scorers(spec, encoder):
    """Two identical scorers: one for evaluate.py's path, one inside the adapter (no shared state)."""
    if spec == "latte_normal":
        return [LatteMixScorer(encoder, TinyPosterior("normal"), latent="normal", distance="l2") for _ in range(2)]
    return [build_scorer(spec, encoder, {}) for _ in range(2)]


@pytest.mark.parametrize("spec", ["mean", {"name": "sen2pro", "n_samples": 2}, "latte_normal"],
                         ids=["mean", "sen2pro", "latte_normal"])
def test_mteb_spearman_equals_evaluate(spec, tiny_encoder, tiny_data_dir, tmp_path, one_thread):
    tasks = [load_task(name, tiny_data_dir) for name in TASKS]
    ours_scorer, mteb_scorer = _scorers(spec, tiny_encoder)
    ours = score_tasks(ours_scorer, tasks)  # what evaluate.py reports ("all": the pooled pairs)
    model = MTEBScorerModel(mteb_scorer, name=model_name(str(tiny_encoder.name), mteb_scorer.name))
    model.prepare(task_sentences(tasks))  # evaluate.py's one represent call over every task
    got = _mteb_scores(model, tasks, tmp_path / "mteb")
    for task in tasks:
        scores = got[f"local-{task.name}"]
        assert 100 * scores["spearman"] == pytest.approx(ours[task.name]["all"]["spearman"], abs=1e-6)
        assert 100 * scores["pearson"] == pytest.approx(ours[task.name]["all"]["pearson"], abs=1e-4)
    assert model.by_cosine == (spec == "mean") == scores_by_cosine(mteb_scorer)
    if spec == "mean":  # the packed row is the vector: mteb's cosine is ours up to sklearn's float32 rounding
        emb = model.encode([task.subsets[next(iter(task.subsets))].sentences1[0]])
        assert emb.shape == (1, tiny_encoder.hidden_size)
    assert any((tmp_path / "mteb").rglob("*.json"))  # mteb wrote its result files where it was told


def test_encode_without_prepare_is_exact_for_a_per_sentence_scorer(tiny_encoder, tiny_data_dir, tmp_path):
    tasks = [load_task("stsb-dev", tiny_data_dir)]
    ours = score_tasks(build_scorer("mean", tiny_encoder, {}), tasks)["stsb-dev"]["all"]["spearman"]
    got = _mteb_scores(MTEBScorerModel(build_scorer("mean", tiny_encoder, {})), tasks, tmp_path)
    assert 100 * got["local-stsb-dev"]["spearman"] == pytest.approx(ours, abs=1e-6)


def test_pack_roundtrip_and_similarity_matrix(tiny_encoder):
    rep = {"mu": torch.randn(3, 5, 2), "mask": torch.rand(3, 5) > 0.5, "z": torch.randn(3, 4, dtype=torch.float64)}
    layout = layout_of(rep)
    packed = pack(rep, layout)
    assert packed.shape == (3, 10 + 5 + 4) and packed.dtype.name == "float64"
    back = unpack(packed, layout)
    assert all(torch.equal(back[k], rep[k]) and back[k].dtype == rep[k].dtype for k in rep)
    with pytest.raises(ValueError, match="columns"):
        unpack(packed[:, :-1], layout)

    model = MTEBScorerModel(build_scorer({"name": "sen2pro", "n_samples": 2}, tiny_encoder, {}))
    sents = ["a man plays a guitar .", "a dog runs in the park .", "two cats eat food ."]
    a, b = model.encode([{"text": sents}]), model.encode(sents[::-1])
    matrix = model.similarity(a, b)
    assert matrix.shape == (3, 3)
    assert torch.allclose(matrix.diagonal(), model.similarity_pairwise(a, b))
    assert torch.allclose(matrix[0, 1], model.similarity_pairwise(a[:1], b[1:2])[0])
    assert model.mteb_model_meta.name == "sts-lightning/model__sen2pro" and not model.by_cosine


def test_model_names_are_mteb_style():
    assert model_name("outputs/run/export/", "mean") == "sts-lightning/export__mean"
    assert model_name("all-MiniLM-L6-v2", "wk paper") == "sts-lightning/all-MiniLM-L6-v2__wk_paper"
