"""The masked LM that MLM pretraining trains: ``AutoModelForMaskedLM`` of any encoder (a missing MLM head is new and
tied), or ``from_scratch`` a seeded random ``BertForMaskedLM`` over the shipped bert-base-uncased word pieces."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from torch import nn

from sts_lightning.embeddings.encoders.packaged import bert_uncased_tokenizer_dir, resolve_model_path
from sts_lightning.embeddings.encoders.random_bert import bert_config
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.export_manifest import verify_export
from sts_lightning.embeddings.isolated_rng import isolated_rng

log = logging.getLogger(__name__)
SCRATCH = {"layers": 4, "hidden": 256, "heads": 4, "intermediate": 1024, "max_positions": 512, "seed": 0}


def scratch_spec(value: object) -> dict | None:
    """``model.from_scratch`` as a plain dict of ints with every key (``None``: continued pretraining; ``true``: a
    4x256 BERT), or one ``ConfigError`` line naming the bad key."""
    if value is None or value is False:
        return None
    if value is True:
        return dict(SCRATCH)
    if not isinstance(value, Mapping):
        raise ConfigError(f"model.from_scratch={value!r} must be null, true or a mapping of {sorted(SCRATCH)}")
    unknown = sorted(set(value) - set(SCRATCH))
    if unknown:
        raise ConfigError(f"model.from_scratch.{unknown[0]} is not a key of from_scratch: use {sorted(SCRATCH)}")
    spec = {**SCRATCH, **value}
    for key, number in spec.items():
        low = 0 if key == "seed" else 1
        if isinstance(number, bool) or not isinstance(number, int) or number < low:
            raise ConfigError(f"model.from_scratch.{key}={number!r} is not allowed: it must be an integer >= {low}")
    if spec["hidden"] % spec["heads"]:
        raise ConfigError(f"model.from_scratch.hidden={spec['hidden']} must be divisible by "
                          f"model.from_scratch.heads={spec['heads']}")
    return {key: int(spec[key]) for key in SCRATCH}


def scratch_label(spec: Mapping[str, int]) -> str:
    """How a model card names a from-scratch start."""
    return (f"random BERT {spec['layers']}x{spec['hidden']} ({spec['heads']} heads, intermediate "
            f"{spec['intermediate']}, {spec['max_positions']} positions, seed {spec['seed']}; bert-base-uncased "
            "vocabulary)")


def scratch_masked_lm(spec: Mapping[str, int]):
    """A seeded random ``BertForMaskedLM`` (its encoder drawn as ``make_random_bert`` draws it) and the
    bert-base-uncased tokenizer; the global RNG is left as it was."""
    from transformers import AutoTokenizer, BertForMaskedLM, BertModel

    tokenizer_dir = bert_uncased_tokenizer_dir()
    config = bert_config(tokenizer_dir, spec["layers"], spec["hidden"], spec["heads"], spec["intermediate"],
                         spec["max_positions"])
    with isolated_rng(spec["seed"]):  # seeds the CPU generator only: a CUDA re-seed here would outlive the block
        encoder = BertModel(config)
        model = BertForMaskedLM(config)
    model.base_model.pooler = encoder.pooler
    model.base_model.load_state_dict(encoder.state_dict())  # in place: the decoder stays tied to the embeddings
    return model, AutoTokenizer.from_pretrained(str(tokenizer_dir))


def keep_pooler(model: nn.Module, path: str) -> None:
    """Give a masked LM whose encoder has no pooler the pooler of ``path``'s encoder, so its export loads as a
    ``BertModel`` without a newly initialised pooler."""
    if getattr(model.base_model, "pooler", False) is not None:
        return  # has one, or is no BERT-style encoder
    from transformers import AutoModel

    pooler = getattr(AutoModel.from_pretrained(path), "pooler", None)
    if pooler is not None:
        model.base_model.pooler = pooler


def load_masked_lm(name_or_path: str, key: str = "model.model_name_or_path", require_head: bool = False):
    """``AutoModelForMaskedLM`` and tokenizer of a packaged name, directory or hub name; ``require_head`` (DiffCSE's
    generator): a newly initialised MLM head is a ``ConfigError``, and no pooler is kept."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    path = resolve_model_path(name_or_path)
    if Path(path).is_dir():
        verify_export(Path(path))  # an export of ours: every file as written
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model, info = AutoModelForMaskedLM.from_pretrained(path, output_loading_info=True)
    except (OSError, ValueError) as err:
        raise ConfigError(f"could not load a masked LM from {key}={name_or_path!r} (resolved to "
                          f"{path!r}): {str(err).splitlines()[0]}") from err
    new = [k for k in info.get("missing_keys", ()) if not k.startswith(f"{model.base_model_prefix}.")]
    if new and require_head:
        raise ConfigError(f"{key}={name_or_path!r} has no MLM head ({len(new)} tensors missing, e.g. {new[0]}): use "
                          "a masked LM, e.g. the export of python train.py model=mlm")
    if not require_head:
        keep_pooler(model, path)
    if new:
        log.info("%s has no MLM head (%d tensors): transformers initialised one, its decoder tied to the word "
                 "embeddings", name_or_path, len(new))
    return model, tokenizer


def mlm_head(model: nn.Module) -> nn.Module:
    """The head of a ``*ForMaskedLM`` (BERT's ``cls``): its one child besides the encoder."""
    heads = [m for name, m in model.named_children() if name != model.base_model_prefix]
    if len(heads) != 1:
        raise ConfigError(f"{type(model).__name__} has {len(heads)} modules beside its encoder: cannot tell its "
                          "MLM head (MLM pretraining supports BERT-style masked LMs)")
    return heads[0]
