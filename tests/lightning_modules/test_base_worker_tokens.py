"""Token ids made by the DataLoader's workers (``EncoderModule.batch_tokenizer``), never in ``training_step``.

Why: tokenizing inside the step puts the host's tokenizer on the accelerator's critical path (issue 39). Checked
for every method that embeds text, on its own datamodule and tiny fixtures:

* the ids a loader's workers make (``num_workers`` 0 and 2) are the ids the step would make itself, and the step's
  loss and every gradient are bit for bit those of the same batch tokenized in the step;
* in a real ``train()`` no tokenizer is called while ``training_step`` runs (TSDAE: exactly once a step, for its
  per-step deletion noise, which no worker can know).
"""

from __future__ import annotations

import pytest
import torch
from hydra.utils import get_class, instantiate

from sts_lightning.embeddings.methods.shared.batch_tokens import TOKEN_IDS
from tests.helpers import chosen_groups
from tests.helpers import compose_train_config as _cfg
from tests.method_cases import tiny_overrides

# every method that embeds text in its training step (the others read cached features)
TEXT_METHODS = ("simcse", "simcse_sup", "sbert_nli", "cosent", "ct", "sed", "mlm", "tsdae")
STEP_TOKENIZES = {"tsdae": 1}  # tokenizer calls a step may make: TSDAE's noisy input only


def _config(model: str, tmp_path, tiny_model_dir, train_data_dir, extra=()):
    overrides = [f"model={model}"]
    model_group, data = chosen_groups(overrides)
    tiny = [f"data={data}", *tiny_overrides(model_group, data, tiny_model_dir, tmp_path)]
    return _cfg(tmp_path / "run", tiny_model_dir, train_data_dir, [*overrides, *tiny, *extra])


def _loss_and_grads(module, batch: dict, step: int):
    torch.manual_seed(step)  # the same dropout masks for both tokenizations
    loss = module.training_step(batch, step)
    loss.backward()
    grads = {n: p.grad.to_dense().clone() for n, p in module.named_parameters() if p.grad is not None}
    module.zero_grad(set_to_none=True)
    return loss.detach(), grads


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("model", TEXT_METHODS)
def test_worker_ids_give_the_in_step_loss_and_gradients(model, workers, tmp_path, tiny_model_dir, train_data_dir,
                                                         one_thread):
    cfg = _config(model, tmp_path, tiny_model_dir, train_data_dir)
    datamodule = instantiate(cfg.data)
    module = instantiate(cfg.model, _convert_="all")
    module.log = lambda *args, **kwargs: None  # no trainer
    datamodule.num_workers = workers
    datamodule.tokenize_with(module.batch_tokenizer())
    datamodule.prepare_data()
    datamodule.setup("fit")
    checked = 0
    for step, batch in zip(range(2), datamodule.train_dataloader(), strict=False):
        made = batch[TOKEN_IDS]
        assert made and set(made) <= set(module.text_fields)
        for field, ids in made.items():
            ids = ids[0] if isinstance(ids, tuple) else ids  # MLM's whole-word masking adds the pieces' offsets
            assert ids == module.tokenize(batch[field]), field  # the encoder's own ids
        text_only = {k: v for k, v in batch.items() if k != TOKEN_IDS}
        loss, grads = _loss_and_grads(module, batch, step)
        loss_in_step, grads_in_step = _loss_and_grads(module, text_only, step)
        assert torch.equal(loss, loss_in_step) and torch.isfinite(loss)
        assert grads.keys() == grads_in_step.keys() and grads
        assert all(torch.equal(grads[k], grads_in_step[k]) for k in grads)
        checked += 1
    assert checked == 2


@pytest.mark.parametrize("model", TEXT_METHODS)
def test_no_tokenizer_call_inside_training_step(model, tmp_path, tiny_model_dir, train_data_dir, monkeypatch):
    seen = _train_with_spy(model, tmp_path, tiny_model_dir, train_data_dir, monkeypatch)
    assert seen["steps"] >= 3
    assert seen["calls"] == STEP_TOKENIZES.get(model, 0) * seen["steps"], seen


def test_the_spy_sees_a_step_that_tokenizes(tmp_path, tiny_model_dir, train_data_dir, monkeypatch):
    """The control: a loader without the module's tokenizer leaves the step to tokenize, and the spy counts it."""
    from sts_lightning.datamodules.loader import ResumableDataModule

    monkeypatch.setattr(ResumableDataModule, "batch_tokenizer", lambda self: None)
    seen = _train_with_spy("simcse", tmp_path, tiny_model_dir, train_data_dir, monkeypatch)
    assert seen["calls"] == seen["steps"] >= 3


def _train_with_spy(model: str, tmp_path, tiny_model_dir, train_data_dir, monkeypatch) -> dict:
    """``train()`` a few steps, counting tokenizer calls made while ``training_step`` runs."""
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    from sts_lightning.runs.train_run import train

    cfg = _config(model, tmp_path, tiny_model_dir, train_data_dir,
                  ["trainer.max_steps=3", "+trainer.limit_val_batches=0", "export=false", "trainer.max_epochs=-1",
                   "callbacks.sts_evaluation.tasks=[stsb-dev]"])
    seen = {"in_step": False, "steps": 0, "calls": 0}
    tokenizer_call = PreTrainedTokenizerBase.__call__

    def spy_call(self, *args, **kwargs):
        seen["calls"] += seen["in_step"]
        return tokenizer_call(self, *args, **kwargs)

    cls = get_class(cfg.model._target_)
    training_step = cls.training_step

    def spy_step(self, *args, **kwargs):
        seen["in_step"], seen["steps"] = True, seen["steps"] + 1
        try:
            return training_step(self, *args, **kwargs)
        finally:
            seen["in_step"] = False

    monkeypatch.setattr(PreTrainedTokenizerBase, "__call__", spy_call)
    monkeypatch.setattr(cls, "training_step", spy_step)
    train(cfg)
    return seen
