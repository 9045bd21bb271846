"""``experiment=pipeline/sbert_whitening`` end to end on tiny stages: SBERT-NLI, then whitening fitted on its export."""

from __future__ import annotations

import json

from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from tests.paths import CONFIG_DIR


def test_tiny_sbert_whitening_pipeline_chains_the_export(tmp_path, tiny_model_dir, train_data_dir,  # noqa: F811
                                                          one_thread):
    from sts_lightning.runs.launch import launch as train

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=["experiment=pipeline/sbert_whitening",
                                                      f"paths.data_dir={train_data_dir}", "pipeline.tasks=[stsb-dev]",
                                                      f"pipeline.start={tiny_model_dir}"])
    common = ["model.max_length=32", "model.eval_batch_size=8", "+trainer.fast_dev_run=true",
              "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
              "callbacks.sts_evaluation.batch_size=8"]
    tiny = {"sbert": [f"model.model_name_or_path={tiny_model_dir}", "data.sources=[snli:dev]", "data.batch_size=4"],
            "whitening": ["data.batch_size=4", f"data.cache_dir={tmp_path / 'cache'}"]}
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path)
        cfg.pipeline.common = common
        for stage in cfg.pipeline.stages:
            stage.overrides = [*stage.overrides, *tiny[stage.name]]
    metrics = train(cfg)
    assert "val/stsb-dev_spearman" in metrics
    config = json.loads((tmp_path / "whitening" / "seed42" / "export" / "whitening_config.json").read_text())
    assert config["model_name_or_path"] == str(tmp_path / "sbert" / "seed42" / "export")  # fitted on the SBERT export
    assert config["pooling"] == "mean"
    assert "| whitening | 1 |" in (tmp_path / "pipeline_sts.md").read_text()
