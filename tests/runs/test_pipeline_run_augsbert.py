"""``experiment=pipeline/augsbert`` end to end on the tiny fixtures: a cross-encoder, the gold-only bi-encoder and the
AugSBERT bi-encoder on gold + silver pairs labelled by that cross-encoder, one table (issue 50)."""

from __future__ import annotations

import json

from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from tests.paths import CONFIG_DIR


def test_tiny_augsbert_pipeline_labels_with_its_cross_encoder(tmp_path, tiny_model_dir, train_data_dir, one_thread):  # noqa: F811
    from sts_lightning.runs.launch import launch as train

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=["experiment=pipeline/augsbert", f"paths.data_dir={train_data_dir}",
                                                      "pipeline.tasks=[stsb-dev]", f"pipeline.start={tiny_model_dir}"])
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path)
        cfg.pipeline.common = [f"model.model_name_or_path={tiny_model_dir}", "model.max_length=32",
                               "model.eval_batch_size=8", "+trainer.fast_dev_run=true", "data.batch_size=4",
                               "callbacks.sts_evaluation.batch_size=8", "data.sources=[stsb:train,sick:trial]"]
        for stage in cfg.pipeline.stages:  # the tiny model everywhere (the recipe's backbone and sampler are real)
            stage.overrides = [o for o in stage.overrides if not o.startswith(("data.sampler", "model.model_name"))]
        cfg.pipeline.stages[2].overrides += [f"data.sampler={tiny_model_dir}", f"data.cache_dir={tmp_path / 'cache'}"]
    metrics = train(cfg)
    assert "val/stsb-dev_spearman" in metrics
    table = (tmp_path / "pipeline_sts.md").read_text()
    for row in ("start:", "| cross_encoder | 1 |", "| gold | 1 |", "| augsbert | 1 |"):
        assert row in table, table
    export = tmp_path / "cross_encoder" / "seed1" / "export"
    assert json.loads((export / "config_sentence_transformers.json").read_text())["model_type"] == "CrossEncoder"
    silver = list((tmp_path / "cache").rglob("*.json"))
    assert silver, "the silver pairs were not labelled and cached"
    card = (tmp_path / "augsbert" / "seed1" / "export" / "README.md").read_text()
    assert "silver" in card  # the card counts the silver pairs the bi-encoder trained on
