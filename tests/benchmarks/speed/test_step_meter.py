"""benchmarks/speed/step_meter.py: the callback times steps after its warm-up, skips validations, counts real tokens."""

from __future__ import annotations

import json
from types import SimpleNamespace

import torch
from transformers import AutoTokenizer, BertConfig

from benchmarks.speed.step_meter import StepMeter, batch_lengths


def test_batch_lengths_from_strings_or_attention_masks(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    batch = {"sentences1": ["a man plays", "a dog"], "sentences2": ["a cat runs in the park"], "labels": torch.ones(2)}
    assert batch_lengths(batch, tokenizer, 32) == [5, 4, 8]  # [CLS] words [SEP]
    assert batch_lengths(batch, tokenizer, 4) == [4, 4, 4]  # truncated as the encoder truncates
    assert batch_lengths({"sentences": ["a dog"]}, tokenizer, 32, views=2) == [4, 4]
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    assert batch_lengths({"input_ids": mask, "attention_mask": mask}, tokenizer, 32) == [3, 2]


def test_meter_times_the_steps_after_warm_up_and_writes_a_record(tmp_path, tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = BertConfig(hidden_size=8, intermediate_size=16, num_attention_heads=2, num_hidden_layers=1)
    encoder = SimpleNamespace(tokenizer=tokenizer, max_length=32, model=SimpleNamespace(config=config))
    module = SimpleNamespace(device=torch.device("cpu"), encoder=encoder)
    trainer = SimpleNamespace(precision="32-true", is_global_zero=True, world_size=1)
    out = tmp_path / "e2e.jsonl"
    meter = StepMeter(str(out), run="demo", skip=2, profile_steps=1)
    batch = {"sentences": ["a man plays a guitar", "a dog"]}  # 7 + 4 tokens
    for i in range(7):
        meter.on_train_batch_start(trainer, module, batch, i)
        meter.on_train_batch_end(trainer, module, None, batch, i)
        if i == 4:
            meter.on_validation_end(trainer, module)
    meter.on_train_end(trainer, module)
    record = json.loads(out.read_text())
    assert record["run"] == "demo" and record["steps"] == 4  # 7 steps - 2 warm-up - 1 profiled
    assert record["tokens_per_step"] == 11 and record["idle_fraction"] is None  # a CPU: n/a
    assert record["steps_per_s"] > 0 and record["mfu"] > 0
