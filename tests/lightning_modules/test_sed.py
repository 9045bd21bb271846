"""Sentence Ensemble Distillation: the loss, the teachers' mean as targets (cached once), the student, a run.

Teachers are the tiny random BERT of ``conftest`` and a copy re-initialised with another seed, so the
two give different vectors of the same size; a 16-d BERT is the teacher of the wrong size.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from sts_lightning.embeddings.errors import ConfigError, DataError
from tests.helpers import WORDS
from tests.paths import CONFIG_DIR
from tests.tolerance import TINY_BERT

N_LINES = 20


def _random_bert(src: Path, dst: Path, seed: int, **config) -> Path:
    """A BERT with ``src``'s tokenizer and config (``config`` overrides), weights drawn with ``seed``."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(seed)
    BertModel(BertConfig.from_pretrained(src, **config)).save_pretrained(dst)
    AutoTokenizer.from_pretrained(src).save_pretrained(dst)
    return dst


@pytest.fixture(scope="module")
def teacher2_dir(tmp_path_factory, tiny_model_dir) -> Path:
    return _random_bert(tiny_model_dir, tmp_path_factory.mktemp("teacher2"), seed=1)


@pytest.fixture(scope="module")
def sed_data_dir(tmp_path_factory, tiny_data_dir) -> Path:
    """The tiny STS files plus a wiki file of ``N_LINES`` sentences with 2 empty lines between them."""
    root = tmp_path_factory.mktemp("sed_data") / "data"
    shutil.copytree(tiny_data_dir, root)
    (root / "wiki").mkdir()
    lines = [" ".join(WORDS[j % len(WORDS)] for j in range(i, i + 5)) for i in range(N_LINES)]
    lines[3:3] = [""]
    lines[10:10] = ["   "]
    (root / "wiki" / "wiki_sentences_100k.txt").write_text("\n".join(lines) + "\n")
    return root


def _dm(data_dir, teachers, cache, **kwargs):
    from sts_lightning.datamodules.distillation import DistillationDataModule

    return DistillationDataModule(data_dir=str(data_dir), teachers=[str(t) for t in teachers],
                                  cache_dir=str(cache), batch_size=4, shuffle=False, **kwargs)


# ------------------------------------------------------------------------------------------- the loss


# -------------------------------------------------------------------------------------- the targets
def test_targets_are_the_teachers_mean_and_cached(tmp_path, sed_data_dir, tiny_model_dir, teacher2_dir,
                                                  monkeypatch, one_thread):
    from sts_lightning.embeddings.sources.sentence_source import EncoderSource

    dm = _dm(sed_data_dir, [tiny_model_dir, teacher2_dir], tmp_path / "cache")
    dm.prepare_data()
    dm.setup("fit")
    assert len(dm.dataset) == N_LINES  # the 2 blank lines are skipped
    assert dm.dataset.index.skipped == {"empty": 2}
    assert dm.target_dim == 32 and len(dm.teacher_names) == 2
    sentences = [dm.dataset[i][0] for i in range(len(dm.dataset))]
    assert "" not in sentences
    second = EncoderSource(str(teacher2_dir)).embed(sentences)
    expected = (EncoderSource(str(tiny_model_dir)).embed(sentences) + second) / 2
    assert torch.allclose(dm.dataset.targets, expected, atol=1e-5)
    batch = next(iter(dm.train_dataloader()))
    assert batch["sentences"] == sentences[:4]
    assert batch["targets"].dtype == torch.float32 and torch.allclose(batch["targets"], expected[:4], atol=1e-5)

    def fail(self, sentences):
        raise AssertionError("encoded again instead of using the cache")

    monkeypatch.setattr(EncoderSource, "embed", fail)
    again = _dm(sed_data_dir, [tiny_model_dir, teacher2_dir], tmp_path / "cache")
    again.prepare_data()  # the ensemble's targets are cached
    again.setup("fit")
    assert np.array_equal(again.dataset.targets.numpy(), dm.dataset.targets.numpy())
    single = _dm(sed_data_dir, [teacher2_dir], tmp_path / "cache")
    single.prepare_data()  # a new ensemble, but each teacher's vectors are cached
    single.setup("fit")
    assert torch.allclose(single.dataset.targets, second, atol=1e-6)


def test_teachers_of_different_sizes_raise(tmp_path, sed_data_dir, tiny_model_dir, one_thread):
    small = _random_bert(tiny_model_dir, tmp_path / "small", seed=2, hidden_size=16)
    dm = _dm(sed_data_dir, [tiny_model_dir, small], tmp_path / "cache")
    with pytest.raises(ConfigError, match="32-d.*16-d"):
        dm.prepare_data()


def test_missing_file_and_no_teacher(tmp_path, sed_data_dir, tiny_model_dir):
    with pytest.raises(ConfigError, match="at least one teacher"):
        _dm(sed_data_dir, [], tmp_path / "cache")
    with pytest.raises(DataError, match="not found"):
        _dm(sed_data_dir, [tiny_model_dir], tmp_path / "cache", files=["wiki/nope.txt"]).prepare_data()
    with pytest.raises(DataError, match="run prepare_data"):
        _dm(sed_data_dir, [tiny_model_dir], tmp_path / "empty_cache").setup("fit")


# ------------------------------------------------------------------------------------------ the student
@pytest.fixture()
def student(tiny_model_dir, one_thread):
    from sts_lightning.lightning_modules.sed import SEDModule

    torch.manual_seed(0)
    return SEDModule(model_name_or_path=str(tiny_model_dir), max_length=32, eval_batch_size=8, eval_layers=2)


SENTENCES = ["a man plays a guitar .", "a dog runs in the park .", "the woman reads a book .",
             "two children kick a ball ."]


def test_student_learns_a_fixed_batch(student):
    student.encoder_model.eval()  # no dropout: the loss of a fixed batch must fall monotonically-ish
    target = torch.randn(len(SENTENCES), 32, generator=torch.Generator().manual_seed(0))
    batch = {"sentences": SENTENCES, "targets": target}
    optimizer = torch.optim.Adam(student.parameters(), lr=1e-3)
    losses = []
    for step in range(6):
        loss = student.training_step(batch, step)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


def test_student_trains_on_the_final_layer_and_scores_on_the_last_two(student):
    from sts_lightning.embeddings.methods.pooling import masked_mean

    assert student.hparams.pooling == "last2_avg" and student.hparams.eval_layers == 2
    scorer = student.scorer()
    assert scorer.pooling == "last2_avg"
    student.encoder_model.eval()
    ids = student.encoder.tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        states = student.encoder_model(**ids, output_hidden_states=True).hidden_states
        last2 = masked_mean((states[-1] + states[-2]) / 2, ids["attention_mask"])
        last = masked_mean(states[-1], ids["attention_mask"])
        torch.testing.assert_close(scorer.represent(SENTENCES)["embedding"], last2, **TINY_BERT)
        torch.testing.assert_close(student.embed_train(SENTENCES), last, **TINY_BERT)


def test_eval_layers_and_dim_mismatch(student, tiny_model_dir, tmp_path):
    from sts_lightning.lightning_modules.sed import SEDModule

    with pytest.raises(ConfigError, match="32-d vectors but the teachers' mean is 16-d"):
        student.training_step({"sentences": SENTENCES, "targets": torch.zeros(4, 16)}, 0)
    with pytest.raises(ConfigError, match="eval_layers"):
        SEDModule(model_name_or_path=str(tiny_model_dir), eval_layers=4)
    # the layer average travels to SentenceTransformer (vectors: tests/lightning_modules/test_export_roundtrip.py)
    assert (student.export(tmp_path / "two") / "1_WeightedLayerPooling").is_dir()
    one = SEDModule(model_name_or_path=str(tiny_model_dir), max_length=32, eval_layers=1)
    assert one.hparams.pooling == "mean" and not (one.export(tmp_path / "one") / "1_WeightedLayerPooling").exists()
    assert SEDModule(model_name_or_path=str(tiny_model_dir), eval_layers=3).scorer().pooling == "last3_avg"


# ------------------------------------------------------------------------------------------- a full run
def test_experiment_fast_dev_run(tmp_path, tiny_model_dir, teacher2_dir, sed_data_dir, one_thread):
    from sts_lightning.runs.train_run import train

    overrides = ["experiment=sed/minilm_l3", f"model.model_name_or_path={tiny_model_dir}", "model.max_length=32",
                 "model.eval_batch_size=8", f"paths.data_dir={sed_data_dir}", f"data.teachers=[{tiny_model_dir},"
                 f"{teacher2_dir}]", "data.batch_size=4", f"data.cache_dir={tmp_path / 'cache'}",
                 "+trainer.fast_dev_run=true", "export=false", "callbacks.sts_evaluation.batch_size=8",
                 "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false"]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path / "run")
    metrics = train(cfg)
    assert "val/stsb-dev_spearman" in metrics and np.isfinite(metrics["train/loss"]), metrics
    assert np.isfinite(metrics["train/cosine"])


# ------------------------------------------------------------------- teachers mapped onto the student
def test_map_onto_recovers_a_rotated_scaled_shifted_copy():
    from sts_lightning.datamodules.distillation import map_onto

    g = torch.Generator().manual_seed(0)
    reference = torch.randn(60, 8, generator=g).double() + 3.0
    centred = reference - reference.mean(0)
    rotation, _ = torch.linalg.qr(torch.randn(8, 8, generator=g).double())
    teacher = centred @ rotation * 2.5 - 7.0  # another basis, scale and mean
    assert np.allclose(map_onto(teacher.numpy(), reference.numpy()), reference.numpy(), atol=1e-8)
    wider, _ = torch.linalg.qr(torch.randn(12, 8, generator=g).double())  # 8-d space inside a 12-d teacher
    assert np.allclose(map_onto((centred @ wider.T).numpy(), reference.numpy()), reference.numpy(), atol=1e-8)


def test_align_to_maps_each_teacher_onto_the_student_before_the_mean(tmp_path, sed_data_dir, tiny_model_dir,
                                                                     teacher2_dir, one_thread):
    from sts_lightning.datamodules.distillation import map_onto
    from sts_lightning.embeddings.sources.sentence_source import EncoderSource

    teachers = [tiny_model_dir, teacher2_dir]
    dm = _dm(sed_data_dir, teachers, tmp_path / "cache", align_to=str(tiny_model_dir))
    assert dm.targets_path() != _dm(sed_data_dir, teachers, tmp_path / "cache").targets_path()
    dm.prepare_data()
    dm.setup("fit")
    sentences = [dm.dataset[i][0] for i in range(len(dm.dataset))]
    student = EncoderSource(str(tiny_model_dir)).embed(sentences).numpy()  # also the first teacher: not mapped
    second = EncoderSource(str(teacher2_dir)).embed(sentences).numpy()
    expected = (student + map_onto(second, student)) / 2
    assert np.allclose(dm.dataset.targets.numpy(), expected, atol=1e-5)
    info = json.loads(dm.targets_path().with_suffix(".json").read_text())
    assert 0.0 < info["start_cosine"] <= 1.0


def test_align_to_lets_teachers_of_other_sizes_join(tmp_path, sed_data_dir, tiny_model_dir, one_thread):
    small = _random_bert(tiny_model_dir, tmp_path / "small", seed=2, hidden_size=16, intermediate_size=32)
    dm = _dm(sed_data_dir, [small], tmp_path / "cache", align_to=str(tiny_model_dir))
    dm.prepare_data()
    assert dm.target_dim == 32  # the student's size, not the teacher's


def test_model_sed_brings_runnable_teachers_and_data_distillation_alone_does_not():
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        sed = compose(config_name="train", overrides=["model=sed", "paths.data_dir=/data"])
        other = compose(config_name="train", overrides=["model=ct", "data=distillation", "paths.data_dir=/data"])
    assert len(sed.data.teachers) >= 2 and sed.data.align_to == sed.model.model_name_or_path
    assert OmegaConf.is_missing(other.data, "teachers")
    with pytest.raises(MissingMandatoryValue):
        OmegaConf.to_container(other.data, resolve=True, throw_on_missing=True)
