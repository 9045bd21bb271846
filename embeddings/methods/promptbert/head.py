"""PromptBERT's supervised head: BERT's MLM transform (``Linear -> act -> LayerNorm``) over the [MASK] state, kept at
evaluation, saved beside an export.

Why this head: the supervised recipe (``run.sh sup-bert``: ``--mask_embedding_sentence_org_mlp``) trains
``BertPredictionHeadTransform`` on the [MASK] state and the template's denoising state alike, and evaluates through
it (``evaluation.py`` loads it back as ``cls.predictions.transform``). The unsupervised recipe's head is SimCSE's
``Linear + tanh``, used in training only (``--mlp_only_train``), so it is never saved.
"""

from __future__ import annotations

import json
from pathlib import Path

from torch import nn

from sts_lightning.embeddings.errors import ConfigError

HEAD_WEIGHTS, HEAD_CONFIG = "prompt_head.safetensors", "prompt_head.json"


def transform_head(hidden: int, act: str = "gelu", eps: float = 1e-12, init_std: float = 0.02) -> nn.Sequential:
    """``BertPredictionHeadTransform``: dense, the config's activation, LayerNorm; initialised as BERT initialises a
    module the checkpoint lacks (normal ``init_std`` weights, zero bias, LayerNorm 1 / 0): the authors' ``mlp``
    is not in ``bert-base-uncased``'s checkpoint under that name."""
    from transformers.activations import ACT2FN

    if act not in ACT2FN:
        raise ConfigError(f"prompt head activation {act!r} is not one of transformers' ({', '.join(sorted(ACT2FN))})")
    head = nn.Sequential(nn.Linear(hidden, hidden), ACT2FN[act], nn.LayerNorm(hidden, eps=eps))
    nn.init.normal_(head[0].weight, std=init_std)
    nn.init.zeros_(head[0].bias)
    head.act_name = act  # what save_head records
    return head


def head_for(config) -> nn.Sequential:
    """``transform_head`` with a Hugging Face config's width, activation, LayerNorm eps and init range."""
    act = config.hidden_act if isinstance(config.hidden_act, str) else "gelu"
    return transform_head(int(config.hidden_size), act, float(getattr(config, "layer_norm_eps", 1e-12)),
                          float(getattr(config, "initializer_range", 0.02)))


def save_head(head: nn.Sequential, folder: str | Path) -> None:
    """The head's weights and what rebuilds it, beside an export's encoder."""
    from safetensors.torch import save_file

    folder = Path(folder)
    linear, _, norm = head
    spec = {"hidden": linear.in_features, "act": head.act_name, "eps": norm.eps}
    save_file({k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}, str(folder / HEAD_WEIGHTS))
    (folder / HEAD_CONFIG).write_text(json.dumps(spec, indent=2) + "\n")


def load_head(folder: str | Path) -> nn.Sequential:
    """The head ``save_head`` wrote into ``folder`` (eval mode, CPU); one line if it is not there."""
    from safetensors.torch import load_file

    folder = Path(folder).expanduser()
    if not (folder / HEAD_CONFIG).is_file() or not (folder / HEAD_WEIGHTS).is_file():
        raise ConfigError(f"scorer prompt: head={str(folder)!r} holds no PromptBERT head ({HEAD_CONFIG}, {HEAD_WEIGHTS}): "
                          "give the export directory of model=promptbert model.objective=supervised")
    spec = json.loads((folder / HEAD_CONFIG).read_text())
    head = transform_head(int(spec["hidden"]), str(spec["act"]), float(spec["eps"]))
    head.load_state_dict(load_file(str(folder / HEAD_WEIGHTS)))
    return head.eval()

