"""The cross-encoder equals sentence-transformers' ``CrossEncoder`` on the same weights and batch (issue 50).

Parity: the logits of one batch and each objective's loss against the sentence-transformers cross-encoder loss of
its name (``BinaryCrossEntropyLoss``, ``MSELoss`` with a sigmoid, ``CrossEntropyLoss``), to 1e-5, through the
export that ``CrossEncoder(path)`` loads; ``CrossEncoder(export).predict`` and ``sts_lightning.load(export)``
give the scores the STS callback evaluated.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sts_lightning.embeddings.errors import ConfigError

PAIRS = [("a man plays a guitar .", "a man plays music"), ("a dog runs in the park", "two children read a book ."),
         ("the woman cuts an onion in the kitchen .", "a woman is slicing an onion"), ("a cat", "a cat sleeps")]
FIRST, SECOND = [a for a, _ in PAIRS], [b for _, b in PAIRS]


def _module(model_dir, **options):
    from sts_lightning.lightning_modules.cross_encoder import CrossEncoderModule

    torch.manual_seed(0)
    return CrossEncoderModule(str(model_dir), max_length=32, eval_batch_size=3, **options)


@pytest.fixture(scope="module")
def exported(tiny_model_dir, tmp_path_factory):
    module = _module(tiny_model_dir)
    return module, module.export(tmp_path_factory.mktemp("ce") / "export")


@pytest.mark.parametrize("objective", ["bce", "mse", "nli"])
def test_logits_and_loss_equal_sentence_transformers_cross_encoder(objective, tiny_model_dir, tmp_path, one_thread):
    from sentence_transformers import CrossEncoder
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss, CrossEntropyLoss, MSELoss

    from sts_lightning.embeddings.methods.cross_encoder.objective import pair_loss

    module = _module(tiny_model_dir, objective=objective).eval()
    reference = CrossEncoder(str(module.export(tmp_path / "export")), device="cpu")
    reference.eval()
    ours = module.pair_logits(FIRST, SECOND)
    theirs = reference(reference.preprocess(PAIRS))["scores"]
    torch.testing.assert_close(ours, theirs.view_as(ours), atol=1e-5, rtol=0)
    targets = torch.tensor([0, 2, 1, 0]) if objective == "nli" else torch.tensor([0.9, 0.1, 0.75, 0.4])
    their_loss = {"bce": lambda: BinaryCrossEntropyLoss(reference), "mse": lambda: MSELoss(reference, nn.Sigmoid()),
                  "nli": lambda: CrossEntropyLoss(reference)}[objective]()
    expected = their_loss([FIRST, SECOND], targets)
    torch.testing.assert_close(pair_loss(objective, ours, targets), expected, atol=1e-5, rtol=0)


def test_cross_encoder_predict_and_sl_load_give_the_evaluated_scores(exported, one_thread):
    from sentence_transformers import CrossEncoder

    import sts_lightning as sl

    module, folder = exported
    with torch.no_grad():
        evaluated = module.eval().scorer().score_pairs(FIRST, SECOND)
    predicted = CrossEncoder(str(folder), device="cpu").predict(PAIRS, batch_size=2, convert_to_tensor=True)
    torch.testing.assert_close(predicted.float().cpu(), evaluated, atol=1e-5, rtol=0)
    loaded = sl.load(folder)
    torch.testing.assert_close(loaded.similarity(FIRST, SECOND), evaluated, atol=1e-5, rtol=0)
    assert loaded.similarity(*PAIRS[0]) == pytest.approx(float(evaluated[0]), abs=1e-5)
    with pytest.raises(TypeError, match="scores pairs jointly"):
        loaded.encode(FIRST)


def test_the_weights_are_held_once_and_the_head_reads_a_trained_pooler(tiny_model_dir):
    module = _module(tiny_model_dir)
    keys = list(module.state_dict())
    assert not any(k.startswith("encoder_model.") for k in keys)  # inside pair_model only: one copy per checkpoint
    assert module.encoder_model is module.pair_model.base_model is module.encoder.model
    assert all(p.requires_grad for p in module.pair_model.parameters())  # BERT's head reads the pooler: trained


def test_bad_options_are_one_line(tiny_model_dir):
    with pytest.raises(ConfigError, match="model.objective"):
        _module(tiny_model_dir, objective="cosine")
    with pytest.raises(ConfigError, match="pools nothing"):
        _module(tiny_model_dir, pooling="mean")


def test_the_objective_must_match_its_data():
    from sts_lightning.runs.config_checks import check_config
    from tests.helpers import compose_train

    check_config(compose_train(["model=cross_encoder"]))
    check_config(compose_train(["model=cross_encoder", "model.objective=nli", "data=nli"]))
    with pytest.raises(ConfigError, match="add data=nli"):
        check_config(compose_train(["model=cross_encoder", "model.objective=nli"]))
    with pytest.raises(ConfigError, match="use model.objective=nli"):
        check_config(compose_train(["model=cross_encoder", "data=nli"]))


def test_symmetric_training_reads_both_orders_and_nli_never_swaps(tiny_model_dir, monkeypatch):
    seen = []
    for objective, symmetric, expected in (("bce", True, FIRST + SECOND), ("bce", False, FIRST), ("nli", True, FIRST)):
        module = _module(tiny_model_dir, objective=objective, symmetric=symmetric)
        original = module.pair_logits
        monkeypatch.setattr(module, "pair_logits", lambda a, b, original=original: seen.append(a) or original(a, b))
        monkeypatch.setattr(module, "log", lambda *args, **kwargs: None)
        key, targets = ("labels", torch.tensor([0, 1, 2, 0])) if objective == "nli" else ("scores", torch.rand(4))
        loss = module.training_step({"sentences1": FIRST, "sentences2": SECOND, key: targets}, 0)
        assert seen[-1] == expected and torch.isfinite(loss)


def test_a_pooler_loaded_as_zeros_is_initialised_fresh(tiny_model_dir):
    """A checkpoint converted without its pooler (the packaged ONNX models) holds it as zeros: every score would be
    0.5 and the head would get no gradient; it starts as the identity instead (tanh of the CLS state)."""
    from transformers import AutoModel

    from sts_lightning.embeddings.methods.cross_encoder.pair_model import pair_classifier

    encoder = AutoModel.from_pretrained(str(tiny_model_dir))
    torch.nn.init.zeros_(encoder.pooler.dense.weight)
    torch.nn.init.zeros_(encoder.pooler.dense.bias)
    model = pair_classifier(encoder, 1)
    dense = model.base_model.pooler.dense
    assert torch.equal(dense.weight, torch.eye(32)) and not dense.bias.any()  # tanh(CLS state) to start
