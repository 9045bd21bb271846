"""``sts_lightning.load``: the same scores as ``evaluate.py`` for a model, an export and a scorer spec."""
from __future__ import annotations

import shutil

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

import sts_lightning as sl
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.export_note import evaluate_command, write_loading_note
from sts_lightning.runs.evaluate_run import evaluate
from tests.paths import CONFIG_DIR
from tests.tolerance import TINY_BERT


def _evaluate_py(tmp_path, encoder: str, scorer: str, data_dir, extra=()) -> dict:
    """What ``python evaluate.py encoders=[encoder] scorers=[scorer]`` scores, as one row's tasks."""
    overrides = [f"encoders=[{encoder}]", f"scorers=[{scorer}]", f"paths.data_dir={data_dir}",
                 "tasks=[stsb-dev,sts16]", *extra]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=overrides)
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path / "eval")
    return evaluate(cfg)[0]["tasks"]


def _same_scores(api: dict, script: dict) -> None:
    for task in ("stsb-dev", "sts16"):
        for metric in ("spearman", "pearson"):
            assert api[task]["all"][metric] == pytest.approx(script[task]["all"][metric], abs=1e-6), (task, metric)


def test_a_model_directory_scores_as_evaluate_py_with_mean_pooling(tmp_path, tiny_model_dir, tiny_data_dir):
    model = sl.load(str(tiny_model_dir))
    assert model.scorer.name == "mean"
    _same_scores(model.evaluate(["stsb-dev", "sts16"], data_dir=tiny_data_dir),
                 _evaluate_py(tmp_path, str(tiny_model_dir), "mean", tiny_data_dir))


def test_encode_and_similarity_are_the_scorers_own(tiny_model_dir):
    model = sl.load(str(tiny_model_dir), scorer="cls")
    a, b = ["a man plays a guitar .", "a dog runs ."], ["a man plays music .", "a cat sleeps ."]
    vectors = model.encode(a + b)
    assert vectors.shape == (4, 32)
    expected = torch.nn.functional.cosine_similarity(vectors[:2], vectors[2:])
    torch.testing.assert_close(model.similarity(a, b), expected, atol=1e-6, rtol=0)
    assert model.similarity(a[0], b[0]) == pytest.approx(float(expected[0]), abs=1e-6)


def test_an_export_is_scored_as_its_loading_note_says(tmp_path, tiny_model_dir, tiny_data_dir):
    export = tmp_path / "export"
    shutil.copytree(tiny_model_dir, export)
    write_loading_note(export, "a CLS-pooled encoder", evaluate_command(["<export>"], "cls", max_length=16))
    model = sl.load(str(export))
    assert model.scorer.name == "cls" and model.encoder.max_length == 16
    _same_scores(model.evaluate(["stsb-dev", "sts16"], data_dir=tiny_data_dir),
                 _evaluate_py(tmp_path, str(export), "cls", tiny_data_dir, ["encoder.max_length=16"]))


def test_a_scorer_spec_takes_evaluate_yamls_scorer_options(tmp_path, tiny_model_dir, tiny_data_dir):
    # sbert_wk's layer_start is auto (its class default, written once): the API and the script agree.
    model = sl.load({"name": "sbert_wk"}, encoder=str(tiny_model_dir))
    _same_scores(model.evaluate(["stsb-dev", "sts16"], data_dir=tiny_data_dir),
                 _evaluate_py(tmp_path, str(tiny_model_dir), "sbert_wk", tiny_data_dir))


def test_bad_input_is_one_clear_error(tiny_model_dir):
    with pytest.raises(ConfigError, match="unknown option"):
        sl.load(str(tiny_model_dir), max_lenght=8)
    with pytest.raises(ConfigError, match="scorer"):
        sl.load(str(tiny_model_dir), scorer="meen")
    with pytest.raises(ConfigError, match="cannot load encoder"):
        sl.load("no-such-model-dir-xyz")


def test_load_keeps_the_callers_hydra_app(tiny_model_dir, tmp_path):
    """A notebook or ``@hydra.main`` job that has initialised Hydra keeps its own config search path after ``load``."""
    from hydra.core.global_hydra import GlobalHydra

    (tmp_path / "mine.yaml").write_text("value: 7\n")
    with initialize_config_dir(config_dir=str(tmp_path), version_base="1.3"):
        sl.load(str(tiny_model_dir))
        assert GlobalHydra.instance().is_initialized()
        assert compose(config_name="mine").value == 7
    assert not GlobalHydra.instance().is_initialized()


def test_batching_and_packing_options_reach_the_encoder(tiny_model_dir):
    """``max_tokens`` / ``packing`` as in evaluate.yaml: the default batches by tokens; packed equals padded."""
    default = sl.load(str(tiny_model_dir))
    assert default.encoder.batch_size is None and default.encoder.packing == "auto"
    packed = sl.load(str(tiny_model_dir), max_tokens=32, packing="packed")
    assert (packed.encoder.max_tokens, packed.encoder.packs_batches) == (32, True)
    sentences = ["a man plays a guitar .", "a dog runs ."]
    torch.testing.assert_close(packed.encode(sentences), default.encode(sentences), **TINY_BERT)
    with pytest.raises(ConfigError, match="encoder.packing='fast'"):
        sl.load(str(tiny_model_dir), packing="fast")
