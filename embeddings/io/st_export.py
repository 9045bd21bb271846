"""The sentence-transformers side of an exported encoder: ``SentenceTransformer(path)`` = our pooled vector.

Without ``modules.json`` it silently mean-pools, so what it can reproduce is written with its public module classes
and anything else is refused (``embeddings.io.st_refusal``)."""

from __future__ import annotations

import json
from pathlib import Path

from sts_lightning.embeddings.io.st_refusal import write_refusal
from sts_lightning.embeddings.methods.pooling_layers import LAYER_POOLINGS

ST_POOLING_MODES = {"cls": "cls", "mean": "mean", "max": "max"}


def layer_weights(layers: tuple[int, ...], num_hidden_layers: int) -> tuple[int, list[float]] | str:
    """``(layer_start, weights)`` for ``WeightedLayerPooling``, or why the layers do not exist."""
    total = num_hidden_layers + 1
    if any(not -total <= i < total for i in layers):
        return f"it averages hidden states {list(layers)}, the model has only {total}"
    positive = [i % total for i in layers]
    start = min(positive)
    weights = [0.0] * (total - start)
    for i in positive:
        weights[i - start] += 1.0  # a layer named twice counts twice, as in our average
    return start, weights


def write_sentence_bert_config(folder: str | Path, max_length: int, config_kwargs: dict | None = None) -> Path:
    """``sentence_bert_config.json``: the max sequence length (and config overrides) sentence-transformers applies."""
    config: dict = {"max_seq_length": int(max_length), "do_lower_case": False}
    if config_kwargs:
        config["config_kwargs"] = dict(config_kwargs)
    path = Path(folder) / "sentence_bert_config.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def _module_type(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def write_sentence_transformers_files(folder: str | Path, pooling: str, dim: int, num_hidden_layers: int,
                                      max_length: int, dense=None) -> str | None:
    """Add the sentence-transformers files (``dense``: a ``Linear`` + ``tanh`` after the pooling) to an HF export
    directory; ``None`` when written, else why ``pooling`` cannot be reproduced (the refusal is then written)."""
    import torch
    from sentence_transformers.sentence_transformer.modules import (
        Dense,
        Pooling,
        Transformer,
        WeightedLayerPooling,
    )

    folder = Path(folder)
    config_kwargs: dict = {}
    stages: list = []
    if pooling in LAYER_POOLINGS:
        found = layer_weights(LAYER_POOLINGS[pooling], num_hidden_layers)
        if isinstance(found, str):
            return _refuse(folder, f"pooling {pooling!r}: {found}")
        start, weights = found
        stages.append(WeightedLayerPooling(dim, num_hidden_layers=num_hidden_layers, layer_start=start,
                                           layer_weights=torch.nn.Parameter(torch.tensor(weights))))
        config_kwargs["output_hidden_states"] = True
    elif pooling not in ST_POOLING_MODES:
        return _refuse(folder, f"pooling {pooling!r} has no sentence-transformers equivalent")
    stages.append(Pooling(dim, pooling_mode=ST_POOLING_MODES.get(pooling, "mean")))
    if dense is not None:
        stages.append(Dense(dense.in_features, dense.out_features, bias=dense.bias is not None,
                            activation_function=torch.nn.Tanh(), init_weight=dense.weight.detach().cpu().clone(),
                            init_bias=None if dense.bias is None else dense.bias.detach().cpu().clone()))
    entries = [{"idx": 0, "name": "0", "path": "", "type": _module_type(Transformer)}]
    for idx, module in enumerate(stages, start=1):
        entries.append({"idx": idx, "name": str(idx), "path": f"{idx}_{type(module).__name__}",
                        "type": _module_type(type(module))})
        (folder / entries[-1]["path"]).mkdir()
        module.save(str(folder / entries[-1]["path"]))
    (folder / "modules.json").write_text(json.dumps(entries, indent=2))
    write_sentence_bert_config(folder, max_length, config_kwargs)
    return None


def _refuse(folder: Path, reason: str) -> str:
    write_refusal(folder, reason)
    return reason
