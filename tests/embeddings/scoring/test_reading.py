"""Readings are equal by what they compute (kind and name), whatever function object carries it."""

from __future__ import annotations

import pytest

from sts_lightning.embeddings.methods.pooling import POOLINGS, get_pooling
from sts_lightning.embeddings.scoring.reading import Reading, layer_reading, pooled_reading


def test_equal_names_are_one_reading_and_layers_are_normalised():
    assert pooled_reading("mean", POOLINGS["mean"]) == pooled_reading("mean", get_pooling("mean"))
    assert len({pooled_reading("mean", POOLINGS["mean"]), pooled_reading("cls", POOLINGS["cls"])}) == 2
    assert layer_reading(-1, 4) == layer_reading(3, 4) and layer_reading(-1, 4).key == "layer/3"
    assert layer_reading(1, 4).layer == 1 and pooled_reading("mean", POOLINGS["mean"]).key == "pooled/mean"


def test_a_pooled_reading_has_no_layer():
    with pytest.raises(ValueError, match="not a layer reading"):
        _ = Reading("pooled", "mean").layer
