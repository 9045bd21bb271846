"""Pipelines: placeholder substitution, and a tiny CT -> SED -> Flow chain end to end (then resumed)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.runs.pipeline_run import substitute
from tests.paths import CONFIG_DIR


def test_substitute_places_exports():
    exports = {"ct": ["/r/ct/seed1/export", "/r/ct/seed2/export"], "nli": ["/r/nli/seed0/export"]}
    assert substitute("data.teachers={ct}", exports, 0) == "data.teachers=[/r/ct/seed1/export,/r/ct/seed2/export]"
    assert substitute("model.model_name_or_path={nli}", exports, 1) == "model.model_name_or_path=/r/nli/seed0/export"
    assert substitute("model.model_name_or_path={ct:each}", exports, 1) == "model.model_name_or_path=/r/ct/seed2/export"
    assert substitute("trainer.max_steps=5", exports, 0) == "trainer.max_steps=5"
    with pytest.raises(ConfigError, match="has not run before"):
        substitute("data.teachers={sed}", exports, 0)
    with pytest.raises(ConfigError, match="2 exports"):
        substitute("model.model_name_or_path={ct:each}", exports, 2)


def _tiny_pipeline(out, model_dir, data_dir):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=["experiment=pipeline/ct_sed_flow", f"paths.data_dir={data_dir}",
                                                      "pipeline.tasks=[stsb-dev]", f"pipeline.start={model_dir}"])
    common = [f"model.model_name_or_path={model_dir}", "model.max_length=32", "model.eval_batch_size=8",
              "+trainer.fast_dev_run=true", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
              "callbacks.sts_evaluation.batch_size=8", f"data.cache_dir={out / 'cache'}"]
    tiny_stage = {"ct": ["data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8", "model.pairs=8",
                         "model.positives=2"],
                  "sed": ["data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=4"],
                  "flow": ["data.files=[sts:stsb-dev]", "data.batch_size=4"]}
    with open_dict(cfg):
        cfg.output_dir = str(out)
        cfg.pipeline.common = common
        for stage in cfg.pipeline.stages:
            stage.seeds = [1, 2]
            stage.overrides = [*stage.overrides, *tiny_stage[stage.name]]
    return cfg


def test_tiny_ct_sed_flow_pipeline_runs_end_to_end_and_resumes(tmp_path, tiny_model_dir, train_data_dir,  # noqa: F811
                                                                monkeypatch, one_thread):
    from sts_lightning.runs import train_run
    from sts_lightning.runs.launch import launch as train

    cfg = _tiny_pipeline(tmp_path, tiny_model_dir, train_data_dir)
    metrics = train(cfg)
    assert "val/stsb-dev_spearman" in metrics
    for stage in ("ct", "sed", "flow"):
        for seed in (1, 2):
            assert (tmp_path / stage / f"seed{seed}" / "export").is_dir()
    assert (tmp_path / "flow" / "seed2" / "export" / "flow_config.json").is_file()  # a flow on SED student 2
    table = (tmp_path / "pipeline_sts.md").read_text()
    for row in ("start:", "| ct | 2 |", "ct: full ensemble of 2", "| sed | 2 |", "| flow | 2 |"):
        assert row in table, table
    # every stage-seed is done: a second call must not train again (resume after an interruption)
    monkeypatch.setattr(train_run, "train", lambda cfg: pytest.fail("re-trained a finished stage"))
    assert train(_tiny_pipeline(tmp_path, tiny_model_dir, train_data_dir)) == pytest.approx(metrics)


def test_pipeline_refuses_an_unknown_stage_reference(tmp_path, tiny_model_dir, train_data_dir):  # noqa: F811
    from sts_lightning.runs.launch import launch as train

    cfg = _tiny_pipeline(tmp_path, tiny_model_dir, train_data_dir)
    with open_dict(cfg):
        cfg.pipeline.stages = [cfg.pipeline.stages[1]]  # sed without the ct stage before it
    with pytest.raises(ConfigError, match="has not run before"):
        train(cfg)
