"""Fixtures for the end-to-end run tests: one short training that several modules read."""

from __future__ import annotations

import pytest

from tests.helpers import compose_train_config


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir, train_data_dir):
    """(cfg, metrics, output dir) of a 2-batch SBERT-NLI run on the tiny fixtures, once per test module."""
    from sts_lightning.runs.train_run import train

    out = tmp_path_factory.mktemp("run")
    # An epoch cut to 2 batches (not max_steps, which stops mid-epoch before the STS validation).
    cfg = compose_train_config(out, tiny_model_dir, train_data_dir, ["+trainer.limit_train_batches=2"])
    return cfg, train(cfg), out
