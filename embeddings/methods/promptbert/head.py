"""PromptBERT's supervised head: BERT's MLM transform over the [MASK] state (``--mask_embedding_sentence_org_mlp``),
kept at evaluation and saved beside an export; the unsupervised recipe's SimCSE head is training-only."""

from __future__ import annotations

import json
from pathlib import Path

from torch import nn

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.export_dir import ExportFormat, load_export, load_export_config
from sts_lightning.embeddings.methods.promptbert import PROMPTBERT

# The export's own file (always: its format tag and the evaluated settings) and the head's weights (supervised only).
EXPORT_FORMAT = ExportFormat(PROMPTBERT.export, 1, "promptbert_config.json", "promptbert_head.safetensors", "PromptBERT")
# What the export's modules.json names: the sentence-transformers module computing the evaluated vector (st_module.py;
# a string, so writing an export needs no sentence-transformers import).
ST_MODULE = "sts_lightning.embeddings.methods.promptbert.st_module.PromptBERTEmbedding"


def transform_head(hidden: int, act: str = "gelu", eps: float = 1e-12, init_std: float = 0.02) -> nn.Sequential:
    """``BertPredictionHeadTransform``, initialised as BERT initialises a module its checkpoint lacks."""
    from transformers.activations import ACT2FN

    if act not in ACT2FN:
        raise ConfigError(f"prompt head activation {act!r} is not one of transformers' ({', '.join(sorted(ACT2FN))})")
    head = nn.Sequential(nn.Linear(hidden, hidden), ACT2FN[act], nn.LayerNorm(hidden, eps=eps))
    nn.init.normal_(head[0].weight, std=init_std)
    nn.init.zeros_(head[0].bias)
    head.act_name = act  # what write_prompt_export records
    return head


def head_for(config) -> nn.Sequential:
    """``transform_head`` with a Hugging Face config's width, activation, LayerNorm eps and init range."""
    act = config.hidden_act if isinstance(config.hidden_act, str) else "gelu"
    return transform_head(int(config.hidden_size), act, float(getattr(config, "layer_norm_eps", 1e-12)),
                          float(getattr(config, "initializer_range", 0.02)))


def write_prompt_export(folder: str | Path, settings: dict, head: nn.Sequential | None) -> None:
    """``promptbert_config.json``, the head's weights and the ``modules.json`` naming ``ST_MODULE``, into ``folder``."""
    from safetensors.torch import save_file

    folder = Path(folder)
    spec = None
    if head is not None:
        linear, _, norm = head
        spec = {"hidden": linear.in_features, "act": head.act_name, "eps": norm.eps}
        save_file({k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()},
                  str(folder / EXPORT_FORMAT.weights_file))
    meta = {"format": EXPORT_FORMAT.tag, "version": EXPORT_FORMAT.version, **settings, "head": spec}
    (folder / EXPORT_FORMAT.config_file).write_text(json.dumps(meta, indent=2) + "\n")
    (folder / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": ST_MODULE}], indent=2))


def load_head(folder: str | Path) -> nn.Sequential:
    """The head of a supervised PromptBERT export (eval mode, CPU); one line where ``folder`` holds none."""
    config, tensors = load_export(folder, EXPORT_FORMAT) if _has_head(folder) else (load_export_config(
        folder, EXPORT_FORMAT), None)
    if config.get("head") is None or tensors is None:
        raise ConfigError(f"scorer prompt: head={str(folder)!r}: {EXPORT_FORMAT.describe(folder)} holds no head "
                          "(only model.head=transform exports one)")
    spec = config["head"]
    head = transform_head(int(spec["hidden"]), str(spec["act"]), float(spec["eps"]))
    head.load_state_dict(tensors)
    return head.eval()


def _has_head(folder: str | Path) -> bool:
    return (Path(folder).expanduser() / EXPORT_FORMAT.weights_file).is_file()
