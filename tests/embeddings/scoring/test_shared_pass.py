"""One encode for every scorer of an encoder (issue 38): poolings, SBERT-WK, whitening, BERT-flow and Latte-Mix read
one pass, and each scores exactly as it does alone; Sen2Pro's deterministic pass reads the same store."""

from __future__ import annotations

import math

import pytest
import torch

from sts_lightning.embeddings.io.encoder_identity import encoder_identity
from sts_lightning.embeddings.methods.flow.glow import Glow
from sts_lightning.embeddings.methods.flow.scorer import FlowScorer
from sts_lightning.embeddings.methods.latte_mix.nets import TokenPosterior
from sts_lightning.embeddings.methods.latte_mix.scorer import LatteMixScorer
from sts_lightning.embeddings.methods.pooling import PoolingScorer
from sts_lightning.embeddings.methods.sbert_wk import SBERTWKScorer
from sts_lightning.embeddings.methods.sen2pro.scorer import Sen2ProScorer
from sts_lightning.embeddings.methods.whitening.scorer import Whitening, WhiteningScorer
from sts_lightning.embeddings.scoring.shared_pass import PrecomputedScorer, share_forward_pass
from sts_lightning.sts.scoring import pair_sentences, score_tasks
from sts_lightning.sts.tasks import load_tasks
from tests.tolerance import TINY_BERT

pytestmark = pytest.mark.usefixtures("one_thread")


def _scorers(encoder) -> list:
    """One scorer of every kind that reads the encoder's pass (random heads, seeded)."""
    torch.manual_seed(0)
    whitening = Whitening(torch.randn(32), torch.randn(32, 8), {"pooling": "first_last_avg",
                                                                 "encoder": encoder_identity(encoder)})
    flow = Glow(32, levels=2, depth=1, hidden=8)
    flow.train()
    flow(torch.randn(16, 32))  # ActNorm's data-dependent init
    return [PoolingScorer(encoder, "cls"), PoolingScorer(encoder, "mean"), PoolingScorer(encoder, "first_last_avg"),
            SBERTWKScorer(encoder, layer_start=0), WhiteningScorer(encoder, whitening), FlowScorer(encoder, flow.eval()),
            LatteMixScorer(encoder, TokenPosterior(32, "categorical", 4, 5, 16).eval(), layer=1, distance="js"),
            LatteMixScorer(encoder, TokenPosterior(32, "normal", 4, hidden_dim=16).eval(), latent="normal")]


def test_every_scorer_kind_reads_one_pass_and_scores_as_alone(tiny_encoder, tiny_data_dir, monkeypatch):
    tasks = load_tasks(["stsb-dev", "sts12", "sick-trial"], tiny_data_dir)
    sentences = pair_sentences(tasks)
    unique = list(dict.fromkeys(sentences))
    alone = [score_tasks(s, tasks) for s in _scorers(tiny_encoder)]  # today's path: each scorer encodes itself

    scorers = _scorers(tiny_encoder)
    batches = []
    original = tiny_encoder.forward_ids
    monkeypatch.setattr(tiny_encoder, "forward_ids", lambda ids: batches.append(len(ids)) or original(ids))
    before = tiny_encoder.sentences_encoded
    shared = share_forward_pass(tiny_encoder, scorers, sentences)
    together = [score_tasks(s, tasks) for s in shared]

    assert all(isinstance(s, PrecomputedScorer) for s in shared)
    assert len(batches) == math.ceil(len(unique) / tiny_encoder.batch_size)  # ONE pass for 8 scorers
    assert sum(batches) == len(unique) == tiny_encoder.sentences_encoded - before
    assert together == alone  # every correlation of every task, equal to the last bit


def test_served_representations_equal_the_scorers_own(tiny_encoder, tiny_data_dir):
    tasks = load_tasks(["stsb-dev"], tiny_data_dir)
    unique = list(dict.fromkeys(pair_sentences(tasks)))
    for scorer, served in zip(_scorers(tiny_encoder), share_forward_pass(tiny_encoder, _scorers(tiny_encoder), unique),
                              strict=True):
        own, got = scorer.represent(unique), served.represent(unique)
        assert own.keys() == got.keys() and all(torch.equal(own[k], got[k]) for k in own), scorer.name


def test_a_scorer_batching_otherwise_or_on_another_encoder_passes_through(tiny_encoder, tiny_model_dir):
    from sts_lightning.embeddings.encoders.hf import HFEncoder

    other = HFEncoder.from_pretrained(str(tiny_model_dir), max_length=32, batch_size=4)
    odd = PoolingScorer(tiny_encoder, "mean", batch_size=3)  # other batches would round differently
    foreign = PoolingScorer(other, "mean")
    shared = share_forward_pass(tiny_encoder, [odd, foreign, PoolingScorer(tiny_encoder, "cls")], ["a dog runs ."])
    assert shared[0] is odd and shared[1] is foreign and isinstance(shared[2], PrecomputedScorer)


def test_sen2pro_takes_its_deterministic_pass_from_the_store(tiny_encoder, tiny_data_dir):
    tasks = load_tasks(["stsb-dev"], tiny_data_dir)
    sentences = pair_sentences(tasks)
    options = {"n_samples": 3, "uncertainty": ["data"], "seed": 0}
    unique = list(dict.fromkeys(sentences))
    alone = Sen2ProScorer(tiny_encoder, **options).represent(unique)
    sen2pro = Sen2ProScorer(tiny_encoder, **options)
    shared = share_forward_pass(tiny_encoder, [PoolingScorer(tiny_encoder, "first_last_avg"), sen2pro], sentences)
    assert shared[1] is sen2pro and sen2pro.readings is not None
    together = sen2pro.represent(unique)
    for key in ("mean", "var"):  # a copy equal to an STS sentence takes the shared pass's vector: rounding only
        torch.testing.assert_close(together[key], alone[key], **TINY_BERT)
    encoded = tiny_encoder.sentences_encoded
    again = sen2pro.represent(unique)
    assert all(torch.equal(again[k], together[k]) for k in again) and tiny_encoder.sentences_encoded == encoded


def test_mc_dropout_passes_never_come_from_the_store(tiny_encoder, tiny_data_dir):
    tasks = load_tasks(["stsb-dev"], tiny_data_dir)
    sen2pro = Sen2ProScorer(tiny_encoder, n_samples=2, uncertainty=["model"], seed=0)
    share_forward_pass(tiny_encoder, [sen2pro], pair_sentences(tasks))
    first = score_tasks(sen2pro, tasks)
    encoded = tiny_encoder.sentences_encoded
    assert score_tasks(sen2pro, tasks) == first  # the same seeded draws ...
    assert tiny_encoder.sentences_encoded > encoded  # ... drawn again, not served
