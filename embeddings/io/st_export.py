"""The sentence-transformers side of an exported encoder: ``SentenceTransformer(path)`` = our pooled vector.

Why a table and a refusal: sentence-transformers loads a Hugging Face directory WITHOUT its files by
mean pooling, silently. An export whose pooling it cannot reproduce must therefore say so (see
``embeddings.io.export_note``) rather than look loadable. What it can reproduce exactly:

- ``cls`` / ``mean`` / ``max``: its ``Pooling`` module (same masking, [CLS]/[SEP] included, as ours).
- the layer averages of ``embeddings.methods.pooling_layers.LAYER_POOLINGS`` (``first_last_avg``, ``last2_avg``,
  ``last3_avg``): ``WeightedLayerPooling`` with weight 1 on each averaged layer and 0 on the others (a
  weighted mean over the layers is then their plain average), then a mean ``Pooling``. The transformer
  must hand over every layer: ``config_kwargs: {output_hidden_states: true}`` in
  ``sentence_bert_config.json`` asks for it, so the Hugging Face ``config.json`` stays as trained.
- a ``Linear`` + ``tanh`` head after the pooling (SimCSE's MLP kept at evaluation): its ``Dense`` module
  with ``Tanh`` (``dense=``).

Only the public module classes are used (sentence-transformers 6 moved its internals); their own
``save`` writes their configs and ``modules.json`` names them by their own import path, so the files
follow the installed version's format. Nothing here needs ``trust_remote_code``.

A pooling it cannot reproduce gets the refusal instead (``embeddings.io.st_refusal``: a ``modules.json`` whose
module sentence-transformers will not load as anything else), never no ``modules.json``, which it would read as
"mean pooling".
"""

from __future__ import annotations

import json
from pathlib import Path

from sts_lightning.embeddings.io.st_refusal import write_refusal
from sts_lightning.embeddings.methods.pooling_layers import LAYER_POOLINGS

ST_POOLING_MODES = {"cls": "cls", "mean": "mean", "max": "max"}


def layer_weights(layers: tuple[int, ...], num_hidden_layers: int) -> tuple[int, list[float]] | str:
    """``(layer_start, weights)`` for ``WeightedLayerPooling``, or why the layers do not exist.

    Args:
        layers: ``hidden_states`` indices as in ``LAYER_POOLINGS`` (0 = embeddings output, -1 = last).
        num_hidden_layers: transformer layers (``hidden_states`` has one more entry).
    """
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
    """``sentence_bert_config.json``: the max sequence length (and Hugging Face config overrides) that
    sentence-transformers applies when it loads ``folder``; the one writer of that file."""
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
    """Add the sentence-transformers files to a Hugging Face export directory.

    Args:
        dense: an optional ``torch.nn.Linear`` applied after the pooling, followed by ``tanh`` (SimCSE's MLP).

    Returns:
        ``None`` when written; otherwise the reason ``pooling`` cannot be reproduced (then the refusal is written:
        ``embeddings.io.st_refusal.write_refusal``).
    """
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
