"""``last.ckpt`` for resuming: every N optimizer steps and at every epoch end, from the first steps on.

Why not ``ModelCheckpoint(save_last=True)``: it defers ``last.ckpt`` until the monitored metric exists (a run killed
before the first validation had nothing to resume), and a step trigger cannot also save at epoch ends.
"""

from __future__ import annotations

from lightning.pytorch.callbacks import ModelCheckpoint


class LastCheckpoint(ModelCheckpoint):
    """Only ``<dirpath>/last.ckpt``: every ``every_n_train_steps`` steps (0: never mid-epoch) and at each epoch end."""

    def __init__(self, dirpath: str, every_n_train_steps: int = 200):
        super().__init__(dirpath=dirpath, monitor=None, save_top_k=0, save_last=True,
                         every_n_train_steps=int(every_n_train_steps), save_on_train_epoch_end=True,
                         enable_version_counter=False)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def save_now(self, trainer, again: bool = False) -> str | None:
        """Write ``last.ckpt`` at this step on every rank (collective), as the step trigger would; its path, ``None``
        where this trainer writes none. Already written: just its path, unless ``again`` (a stop mid-validation)."""
        if self._last_global_step_saved == trainer.global_step and self.last_model_path and not again:
            return self.last_model_path
        if again and self._last_global_step_saved == trainer.global_step:
            self._last_global_step_saved = -1  # the skip below only means "saved at this step already"
        if self._should_skip_saving_checkpoint(trainer):
            return None
        self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))
        return self.last_model_path
