"""``model.mini_batch_size`` is taken by the methods that list ``CachedLoss`` only, refused by the rest in one line
before the model loads (DiffCSE lists it through SimCSE and refuses it itself: its RTD term needs the live vectors)."""

from __future__ import annotations

import importlib

import pytest

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.lightning_modules.grad_cache import CachedLoss


@pytest.mark.parametrize("target, cached", [("simcse:SimCSEModule", True), ("rankcse:RankCSEModule", True),
                                            ("sbert_nli:SBERTNLIModule", True), ("ct:ContrastiveTensionModule", True),
                                            ("diffcse:DiffCSEModule", False), ("sed:SEDModule", False),
                                            ("tsdae:TSDAEModule", False), ("cosent:CoSENTModule", False)])
def test_mini_batch_size_is_refused_before_the_load_where_no_in_batch_loss_is_cached(target, cached):
    name, cls = target.split(":")
    klass = getattr(importlib.import_module(f"sts_lightning.lightning_modules.{name}"), cls)
    assert issubclass(klass, CachedLoss) == (cached or name == "diffcse")
    if not cached:
        with pytest.raises(ConfigError, match=rf"^model\.mini_batch_size=8 is not allowed: {cls} has no in-batch loss "
                                              r"to cache \(use trainer\.accumulate_grad_batches\)$"):
            klass("/nonexistent/model", mini_batch_size=8)  # the path would fail next: refused first
