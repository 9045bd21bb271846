"""What a finished training run tells its export's model card (``embeddings.io.model_card.TrainingFacts``).

A resumed run must export the same bytes as an uninterrupted one: the config shows ``<run dir>`` and leaves out
``ckpt_path``; the wall time has a line of its own.
"""

from __future__ import annotations

import copy
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from sts_lightning.callbacks.step_budget import steps_per_epoch
from sts_lightning.datamodules.loader import ResumableDataModule
from sts_lightning.embeddings.io.model_card import DataFacts, TrainingFacts
from sts_lightning.runs.run_results import before_after_rows

RUN_DIR = "<run dir>"
LOCATION_KEYS = ("ckpt_path",)  # where a process resumed from: no part of how the model was trained


def card_config(cfg: DictConfig) -> str:
    """The resolved config as YAML, the run directory written as ``<run dir>`` and ``LOCATION_KEYS`` left out."""
    shown = copy.deepcopy(cfg)
    with open_dict(shown):
        if "output_dir" in shown:
            shown.output_dir = RUN_DIR
        for key in LOCATION_KEYS:
            shown.pop(key, None)
    try:
        return OmegaConf.to_yaml(shown, resolve=True)
    except OmegaConfBaseException:  # an interpolation only Hydra's app can resolve: show it as written
        return OmegaConf.to_yaml(shown, resolve=False)


def sts_scores(output_dir: Path) -> tuple[str | None, dict[str, float]]:
    """The STS callback's before / after table and its "after" scores (Spearman x100), if the run wrote one."""
    table = output_dir / "sts_before_after.md"
    if not table.is_file():
        return None, {}
    return table.read_text(), dict(before_after_rows(table)).get("after", {})


def training_facts(cfg: DictConfig, trainer, datamodule, output_dir: Path, wall_time_s: float,
                   resumed: bool) -> TrainingFacts:
    """The card's facts of a finished ``runs.train_run.train`` (rank 0, after the STS table was written)."""
    table, after = sts_scores(output_dir)
    per_epoch = steps_per_epoch(trainer)  # "30 steps (0.1 epochs)", not "(1 epoch)", for a run max_steps stopped
    epochs = round(trainer.global_step / per_epoch, 2) if per_epoch else int(trainer.current_epoch)
    return TrainingFacts(config_yaml=card_config(cfg),
                         data=datamodule.data_facts() if isinstance(datamodule, ResumableDataModule) else DataFacts(),
                         steps=int(trainer.global_step), epochs=epochs,
                         precision=str(trainer.precision), sts_table=table, sts_after=after,
                         wall_time_s=float(wall_time_s), resumed=resumed)
