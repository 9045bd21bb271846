"""``step 1 starts ... after launch`` counts from the run's own start: the process's for its first run, the seed's
(or pipeline stage's) for every later one (issue 48: seed 2 logged ``6m20s after launch``, seeds 0 and 1 included)."""

from __future__ import annotations

import pytest

from sts_lightning.callbacks import progress_log
from sts_lightning.runs import seed_runs, train_run
from tests.helpers import compose_train_config


@pytest.fixture()
def old_process(monkeypatch):
    """A process started 1000 s ago that has run no ``train()`` yet."""
    monkeypatch.setattr(progress_log, "process_age_s", lambda: 1000.0)
    monkeypatch.setattr(progress_log, "_runs", 0)
    monkeypatch.setattr(progress_log, "_launched", None)


def test_the_first_run_counts_from_the_process_and_a_later_one_from_its_own_start(old_process):
    progress_log.run_begins()
    assert progress_log.since_launch_s() == 1000.0  # imports, Hydra, data checks: part of the user's wait
    progress_log.run_begins()
    assert 0.0 <= progress_log.since_launch_s() < 5.0


def test_each_seed_of_a_seeds_run_counts_from_its_own_start(old_process, tmp_path, tiny_model_dir, train_data_dir,
                                                           monkeypatch):
    seen = {}

    def fake_train(cfg):  # what LogProgress would print at step 1, without training
        seen[int(cfg.seed)] = progress_log.since_launch_s()
        return {"val/stsb-dev_spearman": 50.0}

    monkeypatch.setattr(train_run, "_train", fake_train)
    cfg = compose_train_config(tmp_path, tiny_model_dir, train_data_dir, ["seeds=[0,1,2]", "export=false"])
    seed_runs.run_seeds(cfg)
    assert seen[0] == 1000.0 and all(0.0 <= seen[s] < 5.0 for s in (1, 2))
