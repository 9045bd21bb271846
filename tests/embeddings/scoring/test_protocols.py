"""Every trainable method honours the protocols the STS callback and the export step rely on (issue 17, item 4).

The module classes are the declared trained methods' LightningModules (``embeddings.methods.registry``), so a new
method is checked without editing this file.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from sts_lightning.embeddings.methods.pooling import PoolingScorer
from sts_lightning.embeddings.methods.registry import trained_methods
from sts_lightning.embeddings.methods.sbert_wk import SBERTWKScorer
from sts_lightning.embeddings.scoring.protocols import BatchedScorer, ReadingScorer, Scorable, TrainedMethod
from sts_lightning.embeddings.scoring.scorer import VectorScorer
from sts_lightning.embeddings.scoring.shared_pass import PrecomputedScorer, share_forward_pass


def _module_classes() -> list:
    params = []
    for declared in trained_methods():
        module, _, name = declared.module.partition(":")
        params.append(pytest.param(getattr(importlib.import_module(module), name), id=declared.name))
    return params


@pytest.mark.parametrize("cls", _module_classes())
def test_every_model_config_builds_a_trained_method(cls):
    assert issubclass(cls, TrainedMethod)  # scorer() for the STS callback, export(path) for train.py


def test_a_module_without_scorer_is_refused_up_front(tiny_data_dir):
    from sts_lightning.callbacks.sts_evaluation import STSEvaluationCallback

    class NotAMethod(torch.nn.Module):
        pass

    assert not isinstance(NotAMethod(), Scorable)
    with pytest.raises(TypeError, match="must define scorer"):
        STSEvaluationCallback(tasks=["stsb-dev"], data_dir=str(tiny_data_dir)).evaluate(trainer=None, pl_module=NotAMethod())


def test_pooled_scorers_share_one_forward_pass_and_others_pass_through(tiny_encoder):
    mean, cls = PoolingScorer(tiny_encoder, pooling="mean"), PoolingScorer(tiny_encoder, pooling="cls")
    wk = SBERTWKScorer(tiny_encoder, layer_start=0)

    class WholeSentence(VectorScorer):  # no reading(): cannot be served from the shared pass
        encoder = tiny_encoder

        def represent(self, sentences):
            return {"embedding": torch.ones(len(sentences), 2)}

    other = WholeSentence()
    assert all(isinstance(s, ReadingScorer) and isinstance(s, BatchedScorer) for s in (mean, cls, wk))
    assert not isinstance(other, ReadingScorer)
    shared = share_forward_pass(tiny_encoder, [mean, cls, wk, other], ["a man plays a guitar .", "a dog runs"])
    assert [type(s) for s in shared[:3]] == [PrecomputedScorer] * 3 and shared[3] is other
