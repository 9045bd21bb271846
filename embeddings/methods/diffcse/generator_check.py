"""Can ``model.generator`` be DiffCSE's generator? Answered from names and the disk alone, before torch loads.

Why: the generator is loaded after the encoder, so a typo or a sentence encoder without an MLM head (every packaged
model, every sentence-transformers directory) used to fail after the heavy imports and the encoder's load. Here:
a name that cannot load (``backbone_problem``), a packaged name (all are sentence encoders, none has an MLM head),
or a local directory whose ``config.json`` lists only architectures without an MLM head is one line naming the key. A hub name
is left to the loader, which refuses a model whose MLM head would be new (``nets.load_generator``).
"""

from __future__ import annotations

import json
from pathlib import Path

from sts_lightning.embeddings.encoders.backbone_names import backbone_problem
from sts_lightning.embeddings.encoders.packaged import packaged_model

# ``architectures`` of a model with an MLM head: BertForMaskedLM (our model=mlm export, bert-base-uncased),
# DistilBertForMaskedLM (the paper's generator), RobertaForMaskedLM, BertForPreTraining, ...
HEADS = ("ForMaskedLM", "ForPreTraining")
FIX = "a masked LM with its head, e.g. the export of python train.py model=mlm (model.generator=<run>/export)"


def generator_problem(key: str, name: object) -> str | None:
    """One line saying why ``name`` (configured at ``key``) cannot be the generator, else ``None``."""
    if not isinstance(name, str) or not name:
        return f"{key}={name!r} must name {FIX}"
    if backbone_problem(key, name):  # its hint lists the packaged names, none of which can be a generator
        return (f"{key}={name!r} cannot load here (no such path, not in the Hugging Face cache, and the hub is off or "
                f"the name is a typo); no packaged model has an MLM head: use {FIX}")
    if packaged_model(name) is not None:
        return f"{key}={name!r} is a packaged sentence encoder, which has no MLM head: use {FIX}"
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
