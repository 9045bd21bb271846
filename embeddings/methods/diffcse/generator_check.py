"""Can ``model.generator`` be DiffCSE's generator? Answered from names and the disk alone, before torch loads.

The generator loads after the encoder, so a mistake would surface only after the heavy imports. A hub name is left
to the loader, which refuses a model whose MLM head would be new.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from sts_lightning.embeddings.encoders.backbone_names import backbone_problem
from sts_lightning.embeddings.encoders.packaged import build_problem, packaged_model
from sts_lightning.embeddings.errors import ConfigError

# ``architectures`` of a model with an MLM head: BertForMaskedLM (our model=mlm export, bert-base-uncased),
# DistilBertForMaskedLM (the paper's generator), RobertaForMaskedLM, BertForPreTraining, ...
HEADS = ("ForMaskedLM", "ForPreTraining")
FIX = ("a masked LM with its head: the packaged paraphrase-MiniLM-L3-v2-mlm (bert-base-uncased vocabulary), or the "
       "export of python train.py model=mlm (model.generator=<run>/export)")


def check_generator(cfg: Mapping) -> None:
    """The declaration's config check: ``model.generator``'s problem as one ``ConfigError`` line."""
    model = cfg.get("model") or {}
    problem = generator_problem("model.generator", model.get("generator")) if "generator" in model else None
    if problem:
        raise ConfigError(problem)


def generator_problem(key: str, name: object) -> str | None:
    """One line saying why ``name`` (configured at ``key``) cannot be the generator, else ``None``."""
    if not isinstance(name, str) or not name:
        return f"{key}={name!r} must name {FIX}"
    if backbone_problem(key, name):  # its hint lists the packaged encoders: a generator needs its own line
        return (f"{key}={name!r} cannot load here (no such path, not in the Hugging Face cache, and the hub is off or "
                f"the name is a typo): use {FIX}")
    packaged = packaged_model(name)
    if packaged is not None and not packaged.masked_lm:
        return f"{key}={name!r} is a packaged sentence encoder, which has no MLM head: use {FIX}"
    if packaged is not None:
        problem = build_problem(name)
        return f"{key}={name!r}: {problem}" if problem else None
    config = Path(name).expanduser() / "config.json"
    if Path(name).expanduser().is_dir():
        if not config.is_file():
            return f"{key}={name!r} is a directory without config.json: use {FIX}"
        try:
            architectures = json.loads(config.read_text()).get("architectures") or []
        except (OSError, ValueError):
            return None  # unreadable here: the loader says why
        if architectures and not any(str(a).endswith(HEADS) for a in architectures):  # none listed: the loader decides
            return f"{key}={name!r} has no MLM head (config.json: architectures {architectures}): use {FIX}"
    return None
