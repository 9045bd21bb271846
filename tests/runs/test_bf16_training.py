"""``trainer.precision=bf16-mixed`` on a CPU: every trainable method takes real steps with finite losses.

Why: bf16 autocast is where CPU training gets its next speed-up (benchmarks/speed/train_speed.py), and each method
has a part that must stay fp32 (contrastive logits, KL terms, Gumbel-Softmax, flow log-determinants,
reconstruction errors); a method that silently produced NaN or refused bf16 weights would only show on a
long run. Each model config trains a few steps on the tiny fixtures in bf16-mixed, and its losses and STS
metric must be finite and its weights stay fp32 (autocast computes in bf16, the optimizer updates fp32).
"""

from __future__ import annotations

import pytest

from tests.helpers import chosen_groups
from tests.helpers import compose_train_config as _cfg
from tests.method_cases import model_names, tiny_overrides

MODELS = model_names()


@pytest.mark.parametrize("model", MODELS)
def test_every_method_trains_in_bf16_mixed_on_a_cpu(model, tmp_path, tiny_model_dir, train_data_dir):
    import math

    import torch

    from sts_lightning.runs.train_run import train

    overrides = [f"model={model}"]
    model_group, data = chosen_groups(overrides)
    tiny = [f"data={data}", *tiny_overrides(model_group, data, tiny_model_dir, tmp_path)]
    common = ["trainer.precision=bf16-mixed", "trainer.max_steps=3", "+trainer.limit_val_batches=0", "export=false",
              "callbacks.sts_evaluation.tasks=[stsb-dev]", "trainer.max_epochs=-1"]
    cfg = _cfg(tmp_path / "run", tiny_model_dir, train_data_dir, [*overrides, *tiny, *common])
    metrics = train(cfg)
    # a method that takes no gradient step (whitening, fitted from moment sums) logs the vectors its moments hold
    progress = "train/vectors" if "train/vectors" in metrics else "train/loss"
    assert metrics.get(progress) is not None and math.isfinite(metrics[progress]), metrics
    assert all(math.isfinite(v) for k, v in metrics.items() if "spearman" in k), metrics
    state = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert all(t.dtype != torch.bfloat16 for t in state.values())  # master weights stay fp32
    assert state and any(t.dtype == torch.float32 for t in state.values())
