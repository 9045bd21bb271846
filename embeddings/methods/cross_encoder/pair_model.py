"""The cross-encoder's network: a Hugging Face ``...ForSequenceClassification`` over ``[CLS] a [SEP] b [SEP]``.

Why the Hugging Face class and not a head of ours: ``sentence_transformers.CrossEncoder(path)`` builds exactly that
class from the export, so training, our scorer and a user's ``CrossEncoder(export).predict`` run one forward pass
(the architecture's own pooler / classification head), whatever the backbone.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path

import torch

NLI_LABELS = ("entailment", "neutral", "contradiction")  # datamodules.nli_readers' coding (0, 1, 2)
SIGMOID = "torch.nn.modules.activation.Sigmoid"  # sentence-transformers' CrossEncoder activation for one label


def pair_classifier(encoder_model: torch.nn.Module, num_labels: int) -> torch.nn.Module:
    """A ``...ForSequenceClassification`` of ``encoder_model``'s architecture whose base model IS ``encoder_model``
    (shared, not copied: the encoder's weights are the ones trained and exported); the head is freshly initialised,
    as sentence-transformers' ``CrossEncoder(<a plain encoder>)`` does. A pooler the head reads but the encoder
    lacks (or holds as zeros) is added fresh; one the head does not read stays out of the gradient (frozen)."""
    from transformers import AutoModelForSequenceClassification

    config = copy.deepcopy(encoder_model.config)
    config.num_labels = int(num_labels)
    if num_labels == len(NLI_LABELS):
        config.id2label = dict(enumerate(NLI_LABELS))
        config.label2id = {label: i for i, label in enumerate(NLI_LABELS)}
    config.architectures = None
    model = AutoModelForSequenceClassification.from_config(config)
    fresh = getattr(model, model.base_model_prefix)
    head_reads_pooler = getattr(fresh, "pooler", None) is not None
    if head_reads_pooler and not _has_weights(getattr(encoder_model, "pooler", None)):
        encoder_model.pooler = _identity_pooler(fresh.pooler)
    elif getattr(encoder_model, "pooler", None) is not None:
        encoder_model.pooler.requires_grad_(head_reads_pooler)
    setattr(model, model.base_model_prefix, encoder_model)
    return model


def _has_weights(module: torch.nn.Module | None) -> bool:
    """A module with any non-zero weight: a checkpoint converted without its pooler (the packaged ONNX models) loads
    it as zeros, which would hold every pair's score at 0.5 and leave the head without a gradient."""
    return module is not None and any(bool(p.detach().abs().sum() > 0) for p in module.parameters())


def _identity_pooler(pooler: torch.nn.Module) -> torch.nn.Module:
    """A pooler the checkpoint lacks starts as ``tanh(CLS state)`` (its dense layer the identity), not as a random
    layer of std 0.02: two fresh layers in series (pooler, classifier) pass the CLS state on at 0.02 x 0.02 and
    barely learn at the recipe's 2e-5 (measured: STS-B dev 41.9 after one epoch from paraphrase-MiniLM-L3-v2)."""
    dense = getattr(pooler, "dense", None)
    if isinstance(dense, torch.nn.Linear) and dense.in_features == dense.out_features:
        with torch.no_grad():
            dense.weight.copy_(torch.eye(dense.in_features))
            dense.bias.zero_()
    return pooler


def pair_features(tokenizer, sentences1: Sequence[str], sentences2: Sequence[str], max_length: int,
                  device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """``[CLS] a [SEP] b [SEP]`` ids, padded to the batch, truncated longest-first to ``max_length`` tokens (what
    sentence-transformers' ``CrossEncoder`` feeds the same model)."""
    if len(sentences1) != len(sentences2):
        raise ValueError(f"pair lists differ in length: {len(sentences1)} vs {len(sentences2)}")
    features = tokenizer(list(sentences1), list(sentences2), padding=True, truncation="longest_first",
                         max_length=int(max_length), return_tensors="pt")
    return {k: v.to(device) for k, v in features.items()}


def pair_logits(model: torch.nn.Module, tokenizer, sentences1: Sequence[str], sentences2: Sequence[str],
                max_length: int) -> torch.Tensor:
    """``(n, num_labels)`` logits of the pairs (gradients flow if enabled)."""
    device = next(model.parameters()).device
    return model(**pair_features(tokenizer, sentences1, sentences2, max_length, device)).logits


def write_cross_encoder_files(folder: Path, num_labels: int) -> None:
    """The sentence-transformers files of a ``CrossEncoder`` directory (its ``save`` writes the same): one
    sequence-classification ``Transformer`` module, the activation ``predict`` applies (sigmoid for one label, as
    sentence-transformers' default; none for NLI's three logits)."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"}]
    module = {"transformer_task": "sequence-classification", "modality_config": {
        "text": {"method": "forward", "method_output_name": "logits"}}, "module_output_name": "scores"}
    config = {"model_type": "CrossEncoder", "activation_fn": SIGMOID if num_labels == 1 else
              "torch.nn.modules.linear.Identity", "default_prompt_name": None, "prompts": {}}
    for name, value in (("modules.json", modules), ("sentence_bert_config.json", module),
                        ("config_sentence_transformers.json", config)):
        (folder / name).write_text(json.dumps(value, indent=2) + "\n")
