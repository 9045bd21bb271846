"""RankCSE: each teacher's vectors cached side by side, the student's step, and bad values as one line early.

Teachers are the tiny random BERT of ``conftest`` and its seed-1 sibling, plus a 16-d BERT: RankCSE combines
only the teachers' similarity lists, so teachers of different sizes may join (SED refuses them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import ENTRY_PROBE
from tests.paths import ROOT


@pytest.fixture(scope="module")
def small_teacher_dir(tmp_path_factory, tiny_model_dir) -> Path:
    """A 16-d BERT with the tiny model's vocabulary: a teacher of another size."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(2)
    dst = tmp_path_factory.mktemp("teacher16")
    BertModel(BertConfig.from_pretrained(tiny_model_dir, hidden_size=16, intermediate_size=32)).save_pretrained(dst)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(dst)
    return dst


def _dm(data_dir, teachers, cache, **kwargs):
    from sts_lightning.datamodules.distillation import DistillationDataModule

    return DistillationDataModule(data_dir=str(data_dir), teachers=[str(t) for t in teachers], cache_dir=str(cache),
                                  batch_size=4, shuffle=False, max_sentences=12, combine="each", **kwargs)


def test_each_teachers_vectors_side_by_side_any_sizes(tmp_path, train_data_dir, tiny_model_dir, other_tiny_model_dir,
                                                      small_teacher_dir, one_thread):
    from sts_lightning.embeddings.sources.build import build_source

    teachers = [tiny_model_dir, small_teacher_dir, other_tiny_model_dir]
    dm = _dm(train_data_dir, teachers, tmp_path)
    dm.prepare_data()
    dm.setup("fit")
    assert dm.teacher_dims == [32, 16, 32]
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) == {"sentences", "teachers"} and [t.shape for t in batch["teachers"]] == [(4, 32), (4, 16), (4, 32)]
    for teacher, got in zip(teachers, batch["teachers"], strict=True):
        want = build_source(str(teacher)).embed(batch["sentences"]).float()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    again = _dm(train_data_dir, teachers, tmp_path)  # a fresh module: setup alone reads the cache and its sizes
    again.setup("fit")
    assert again.teacher_dims == [32, 16, 32] and again.targets_path() == dm.targets_path()
    one = _dm(train_data_dir, teachers[:1], tmp_path)
    sed = _dm(train_data_dir, teachers[:1], tmp_path)
    sed.combine = "mean"
    assert sed.targets_path() != one.targets_path()  # SED's mean and RankCSE's side-by-side vectors: two files
    assert np.load(dm.targets_path()).shape == (12, 80)


def test_combine_rejects_unknown_values_and_align_to(tmp_path, train_data_dir, tiny_model_dir):
    from sts_lightning.datamodules.distillation import DistillationDataModule

    with pytest.raises(ConfigError, match="unknown data.combine 'avg'"):
        DistillationDataModule(teachers=[str(tiny_model_dir)], combine="avg")
    with pytest.raises(ConfigError, match="data.combine=each keeps each teacher's own space"):
        _dm(train_data_dir, [tiny_model_dir], tmp_path, align_to=str(tiny_model_dir))


@pytest.fixture()
def student(tiny_model_dir):
    from sts_lightning.lightning_modules.rankcse import RankCSEModule

    torch.manual_seed(0)
    return RankCSEModule(str(tiny_model_dir), teacher_weights=[1.0, 3.0], max_length=32)


def test_step_is_the_objective_on_the_two_dropout_views(student):
    from sts_lightning.embeddings.methods.rankcse.objective import rankcse_loss, teacher_scores

    sentences = ["alpha beta gamma", "delta epsilon", "zeta eta theta iota", "kappa lambda"]
    torch.manual_seed(1)
    teachers = [torch.randn(4, 8), torch.randn(4, 5)]
    student.log = lambda *a, **k: None
    torch.manual_seed(5)
    loss = student.training_step({"sentences": sentences, "teachers": teachers}, 0)
    torch.manual_seed(5)  # the same dropout masks and ListMLE shuffle
    emb = student.embed_ids(student.training_ids({"sentences": sentences}))
    want = rankcse_loss(*emb.chunk(2), teacher_scores(teachers, [0.25, 0.75], 0.05))["loss"]
    torch.testing.assert_close(loss, want)
    loss.backward()
    assert all(p.grad is not None for p in student.mlp.parameters())
    with pytest.raises(ConfigError, match="model.teacher_weights has 2 weights but the data has 1 teacher"):
        student.training_step({"sentences": sentences, "teachers": teachers[:1]}, 0)
    with pytest.raises(ConfigError, match="data.combine=each"):
        student.training_step({"sentences": sentences, "targets": teachers[0]}, 0)


@pytest.mark.parametrize(("option", "message"), [
    ({"ranking_loss": "listnt"}, "unknown model.ranking_loss 'listnt'; did you mean 'listnet'?"),
    ({"consistency": "kl"}, "unknown model.consistency 'kl'"),
    ({"teacher_weights": [1.0, 0.0]}, "model.teacher_weights[1]=0.0 is not allowed: it must be a number > 0"),
    ({"teacher_weights": []}, "model.teacher_weights=[] is not allowed: it must be a non-empty list"),
    ({"teacher_temperature": 0.0}, "model.teacher_temperature=0.0 is not allowed"),
    ({"distillation_weight": -1.0}, "model.distillation_weight=-1.0 is not allowed"),
    ({"objective": "supervised"}, "RankCSE is unsupervised"),
])
def test_bad_values_are_one_line_before_the_encoder_loads(option, message, monkeypatch):
    from sts_lightning.lightning_modules import base
    from sts_lightning.lightning_modules.rankcse import RankCSEModule

    monkeypatch.setattr(base.EncoderModule, "load_encoder", lambda *a: pytest.fail("the encoder loaded first"))
    with pytest.raises(ConfigError) as err:
        RankCSEModule("unused", **option)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("override", "message"), [
    ("model.ranking_loss=listnt", "unknown model.ranking_loss 'listnt'"),
    ("model.teacher_weights=[1,0]", "model.teacher_weights[1]=0 is not allowed"),
    ("model.teacher_weights=[1,2,3]", "model.teacher_weights has 3 weight(s) for 2 teacher(s)"),
    ("model.pair_teachers=[/tmp]", "model.teacher_weights has 2 weight(s) for 3 teacher(s) (data.teachers, then "
                                   "model.pair_teachers)"),
    ("data.teachers=[all-MiniLM-L6-v2,no-such-teacher]", "unknown backbone data.teachers[1]='no-such-teacher'"),
])
def test_train_py_refuses_bad_values_before_torch_loads(override, message, tmp_path):
    done = subprocess.run([sys.executable, "-c", ENTRY_PROBE, "train.py", "model=rankcse", override,
                           f"hydra.run.dir={tmp_path}"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr
    assert "torch imported: False" in done.stdout


def test_python_api_checks_the_weights_against_the_teachers():
    from sts_lightning.embeddings.methods.rankcse.checks import check_teacher_weights

    cfg = OmegaConf.create({"model": {"teacher_weights": [1.0], "ranking_loss": "listmle"},
                            "data": {"teachers": ["a", "b"]}})
    with pytest.raises(ConfigError, match="1 weight"):
        check_teacher_weights(cfg)
    cfg.model.teacher_weights = None
    check_teacher_weights(cfg)  # null: equal weights


class CosinePairTeacher:
    """A pair teacher whose score of (a, b) is the cosine of a vector teacher's vectors: its list must be the vector
    teacher's list."""

    def __init__(self, vectors: dict) -> None:
        self.vectors = vectors

    def score_pairs(self, first, second):
        a = torch.stack([self.vectors[s] for s in first])
        b = torch.stack([self.vectors[s] for s in second])
        return torch.nn.functional.cosine_similarity(a, b, dim=-1)


def test_a_pair_teacher_ranks_the_batch_like_a_vector_teacher_with_its_weight(tiny_model_dir, tmp_path):
    from sts_lightning.embeddings.methods.rankcse.objective import teacher_scores
    from sts_lightning.lightning_modules.rankcse import RankCSEModule

    sentences = ["alpha beta gamma", "delta epsilon", "zeta eta theta iota", "kappa lambda"]
    torch.manual_seed(1)
    first, second = torch.randn(4, 8), torch.randn(4, 5)
    module = RankCSEModule(str(tiny_model_dir), teacher_weights=[1.0, 3.0], max_length=32,
                           pair_teachers=[str(tmp_path)])
    module.__dict__["_pair_scorers"] = [CosinePairTeacher(dict(zip(sentences, second, strict=True)))]
    got = module.teacher_list([first], sentences)
    expected = teacher_scores([first, second], [1.0, 3.0], module.hparams.teacher_temperature)
    tolerance = {"atol": 20 * 8 * torch.finfo(torch.float32).eps, "rtol": 0}  # fp32 lists of size up to 1 / tau = 20
    torch.testing.assert_close(got, expected, **tolerance)
    alone = RankCSEModule(str(tiny_model_dir), teacher_weights=None, max_length=32, pair_teachers=[str(tmp_path)])
    alone.__dict__["_pair_scorers"] = module._pair_scorers
    torch.testing.assert_close(alone.teacher_list([], sentences), teacher_scores([second], [1.0], 0.05), **tolerance)


def test_a_cross_encoder_export_teaches_a_step_without_joining_the_student(tiny_model_dir, tmp_path, one_thread):
    from sts_lightning.lightning_modules.cross_encoder import CrossEncoderModule
    from sts_lightning.lightning_modules.rankcse import RankCSEModule

    export = CrossEncoderModule(str(tiny_model_dir), max_length=32).export(tmp_path / "ce")
    torch.manual_seed(0)
    student = RankCSEModule(str(tiny_model_dir), teacher_weights=None, max_length=32, pair_teachers=[str(export)])
    student.log = lambda *a, **k: None
    before = set(student.state_dict())
    loss = student.training_step({"sentences": ["a man plays", "a dog runs", "two kids read", "a cat"]}, 0)
    assert torch.isfinite(loss) and set(student.state_dict()) == before  # the teacher is in no checkpoint
    assert not any(p.requires_grad for p in student.pair_scorers()[0].model.parameters())
    with pytest.raises(ConfigError, match="model.pair_teachers: .* is not a directory"):
        RankCSEModule(str(tiny_model_dir), pair_teachers=[str(tmp_path / "missing")])
