"""MLMModule: the live encoder inside the masked LM, its metrics, held-out scoring, export and card, bad options."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel, AutoModelForMaskedLM

from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import WORDS
from tests.helpers import compose_train_config as _cfg

TINY_SCRATCH = {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64, "max_positions": 64}
SENTENCES = [" ".join(WORDS[j % len(WORDS)] for j in range(i, i + 5)) for i in range(20)]


def _module(model_dir, **kwargs):
    from sts_lightning.lightning_modules.mlm import MLMModule

    return MLMModule(str(model_dir), **{"max_length": 32, "eval_batch_size": 4, **kwargs})


def test_the_encoder_is_the_live_encoder_inside_the_masked_lm(tiny_model_dir, one_thread):
    module = _module(tiny_model_dir)
    lm = module.masked_lm
    assert module.encoder_model is lm.base_model and module.mlm_head is lm.cls and module.encoder.model is lm.bert
    assert lm.cls.predictions.decoder.weight is module.encoder_model.embeddings.word_embeddings.weight
    assert {id(p) for p in module.parameters()} == {id(p) for p in lm.parameters()}  # every weight trained, once
    keys = [k for k in module.state_dict() if not k.startswith(("train_accuracy", "val_"))]
    assert len(keys) == len(lm.state_dict())  # no second copy of the encoder in checkpoints


def test_from_scratch_ignores_the_model_path_and_names_itself_on_the_card(one_thread):
    module = _module("not-a-model", from_scratch=TINY_SCRATCH)
    assert module.hparams.from_scratch == {**TINY_SCRATCH, "seed": 0} and type(module.hparams.from_scratch) is dict
    assert module.base_models()[0].startswith("random BERT 1x32")
    assert module.masked_lm.config.vocab_size == 30522


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"from_scratch": {"layers": 0}}, "model.from_scratch.layers=0"),
    ({"mlm_probability": 0.0}, "model.mlm_probability=0.0"),
    ({"max_length": None}, "model.max_length=None"),
    ({"mask_seed": -1}, "model.mask_seed=-1"),
])
def test_a_bad_option_is_one_config_error_before_the_model_loads(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        _module("not-a-model-either", **kwargs)


def test_accuracy_is_the_share_of_masked_positions_predicted_right():
    from sts_lightning.lightning_modules.metrics import accuracy

    metric = accuracy(10)
    metric.update(torch.tensor([1, 2, 3, 4]), torch.tensor([1, 2, 0, 0]))
    metric.update(torch.tensor([5, 5]), torch.tensor([5, 6]))
    assert metric.compute().item() == pytest.approx(3 / 6)


def test_held_out_scores_use_fixed_masks_and_do_not_touch_the_weights(tiny_model_dir, one_thread):
    module = _module(tiny_model_dir).eval()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    first, second = module.score_heldout(SENTENCES), module.score_heldout(SENTENCES)
    assert first == second and set(first) == {"val/mlm_loss", "val/mlm_accuracy"}
    assert 0 <= first["val/mlm_accuracy"] <= 1 and first["val/mlm_loss"] > 0
    assert all(torch.equal(v, module.state_dict()[k]) for k, v in before.items())


def test_training_logs_mlm_metrics_and_exports_a_bert_for_masked_lm(tmp_path, tiny_model_dir, train_data_dir,
                                                                    one_thread):
    from sts_lightning.runs.train_run import train

    run = tmp_path / "run"
    cfg = _cfg(run, tiny_model_dir, train_data_dir, [
        "model=mlm", "data.batch_size=8", "data.heldout_sentences=8", f"data.cache_dir={tmp_path / 'c'}",
        "trainer.max_steps=3", "callbacks.sts_evaluation.tasks=[stsb-dev]"])
    metrics = train(cfg)
    for key in ("train/mlm_loss", "train/mlm_accuracy", "val/mlm_loss", "val/mlm_accuracy", "val/stsb-dev_spearman"):
        assert key in metrics, metrics
    export = run / "export"
    encoder, lm = AutoModel.from_pretrained(export), AutoModelForMaskedLM.from_pretrained(export)
    assert type(lm).__name__ == "BertForMaskedLM"
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    live = {k.removeprefix("encoder_model."): v for k, v in ckpt["state_dict"].items()
            if k.startswith("encoder_model.")}
    for name, value in lm.bert.state_dict().items():
        assert torch.equal(value, live[name]) and torch.equal(encoder.state_dict()[name], value), name
    assert torch.equal(lm.cls.predictions.bias, ckpt["state_dict"]["mlm_head.predictions.bias"])
    assert ckpt["mlm"]["tokens_seen"] > 0 and set(ckpt["mlm"]["heldout"]) == {"val/mlm_loss", "val/mlm_accuracy"}
    card = (export / "README.md").read_text()
    assert f"tokens seen (MLM, all ranks, padding excluded): {ckpt['mlm']['tokens_seen']}" in card
    assert f"final held-out MLM loss {metrics['val/mlm_loss']:.4f}" in card
    assert "held out (never trained on): the last 8" in card and "- steps: 3" in card
