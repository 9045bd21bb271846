"""TSDAE's decoder: a causal LM of the encoder's architecture with cross-attention, its body tied to the encoder.

As sentence-transformers, but tied the other way round: each body parameter the encoder has IS the encoder's (the
encoder is what is exported). transformers 5 has no ``_tie_encoder_decoder_weights``, hence the attribute swap below.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

from torch import nn

from sts_lightning.embeddings.compat import own_parameters
from sts_lightning.embeddings.errors import ConfigError

log = logging.getLogger(__name__)

__all__ = ["build_decoder", "parameter_aliases", "tie_to_encoder"]


@contextmanager
def _quiet_transformers():
    """Silence transformers' load report (cross-attention weights MISSING, as they must be) and its progress bar."""
    from transformers.utils import logging as hf_logging

    before, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(before)
        if bar:
            hf_logging.enable_progress_bar()


def build_decoder(path: str, encoder: nn.Module, tie: bool = True, name: str | None = None) -> nn.Module:
    """The decoder for ``encoder`` (loaded from ``path``), tied to it when ``tie``; ``name``: for messages."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(path)
    config.is_decoder = True
    config.add_cross_attention = True
    kind, name = getattr(config, "model_type", "?"), name or path
    try:
        with _quiet_transformers():
            decoder = AutoModelForCausalLM.from_pretrained(path, config=config, dtype=next(encoder.parameters()).dtype)
    except (ValueError, KeyError) as err:
        raise ConfigError(f"model.model_name_or_path={name!r}: TSDAE needs a decoder of the encoder's architecture "
                          f"({kind}) and transformers has no causal-LM class for it; use a BERT-like encoder "
                          "(BERT, RoBERTa, XLM-R, ELECTRA)") from err
    if not any("crossattention" in name.replace("_", "") for name, _ in decoder.named_parameters()):
        raise ConfigError(f"model.model_name_or_path={name!r}: the causal LM of {kind} ({type(decoder).__name__}) "
                          "has no cross-attention, so it cannot decode from the sentence vector; use a BERT-like "
                          "encoder (BERT, RoBERTa, XLM-R, ELECTRA)")
    if int(config.hidden_size) != int(encoder.config.hidden_size):
        raise ConfigError(f"decoder hidden size {config.hidden_size} != encoder's {encoder.config.hidden_size}")
    if tie:
        tied = tie_to_encoder(decoder, encoder)
        log.info("TSDAE decoder %s: %d parameters tied to the encoder", type(decoder).__name__, tied)
    return decoder


def tie_to_encoder(decoder: nn.Module, encoder: nn.Module) -> int:
    """Make every body parameter of ``decoder`` that ``encoder`` has (same name and shape) the encoder's own, the tied
    LM head included; returns how many were tied."""
    body = getattr(decoder, decoder.base_model_prefix, None)
    if body is None:
        raise ConfigError(f"{type(decoder).__name__} has no base model {decoder.base_model_prefix!r} to tie")
    encoder_modules = dict(encoder.named_modules())
    replaced: dict[int, nn.Parameter] = {}
    for name, param in list(body.named_parameters()):
        module_name, _, attr = name.rpartition(".")
        source = encoder_modules.get(module_name)
        shared = own_parameters(source).get(attr) if source is not None else None
        if shared is not None and shared.shape == param.shape:
            replaced[id(param)] = shared
    if not replaced:
        raise ConfigError(f"no parameter of {type(decoder).__name__} matches the encoder: not the same architecture")
    for module in decoder.modules():
        for attr, param in list(own_parameters(module).items()):
            if param is not None and id(param) in replaced:
                own_parameters(module)[attr] = replaced[id(param)]
    return len(replaced)


def parameter_aliases(module: nn.Module) -> dict[str, str]:
    """``{state-dict key: key of the same tensor seen first}`` for every parameter ``module`` holds twice, so a
    checkpoint keeps one copy."""
    first: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for name, param in module.named_parameters(remove_duplicate=False):
        if id(param) in first:
            aliases[name] = first[id(param)]
        else:
            first[id(param)] = name
    return aliases

