"""A frozen encoder's sentences are encoded at the first STS evaluation only (issue 38): later evaluations run the
trained head on the kept readings, with the numbers a fresh encode gives; changed weights are encoded again."""

from __future__ import annotations

import lightning as L
import torch

from sts_lightning.callbacks.sts_evaluation import STSEvaluationCallback
from sts_lightning.lightning_modules.flow import BertFlowModule
from sts_lightning.sts.scoring import main_score, score_tasks
from sts_lightning.sts.tasks import load_tasks

TASKS = ["stsb-dev", "sts12"]


def test_a_frozen_encoder_is_encoded_once_across_evaluations(tiny_model_dir, tiny_data_dir, tmp_path):
    module = BertFlowModule(str(tiny_model_dir), max_length=32, depth=1, hidden=8)
    encoder = module.frozen_encoder()
    callback = STSEvaluationCallback(tasks=TASKS, data_dir=str(tiny_data_dir), batch_size=4)
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                        default_root_dir=str(tmp_path))
    tasks = load_tasks(TASKS, tiny_data_dir)

    def expected() -> float:  # the scorer on its own, encoding as before issue 38
        module.eval()
        with torch.inference_mode():
            scorer = module.scorer()
            scorer.batch_size = 4
            return main_score(score_tasks(scorer, tasks)["stsb-dev"])

    first = callback.evaluate(trainer, module)
    encoded = encoder.sentences_encoded
    assert encoded == len(callback.unique)
    assert callback.evaluate(trainer, module) == first and encoder.sentences_encoded == encoded  # no pass

    with torch.no_grad():  # a training step of the flow: the head changes, the encoder does not
        for p in module.flow.parameters():
            p.add_(0.05 * torch.randn_like(p))
    moved = callback.evaluate(trainer, module)
    assert encoder.sentences_encoded == encoded and moved != first
    assert moved["val/stsb-dev_spearman"] == expected()

    with torch.no_grad():  # frozen weights changed in place after all: encoded again
        encoder.model.encoder.layer[0].output.dense.bias.add_(0.5)
    before = encoder.sentences_encoded
    callback.evaluate(trainer, module)
    assert encoder.sentences_encoded == before + encoded
