"""PromptBERT's config checks, before torch loads: its templates (the constructor and the scorer build the same
``Template``, so a Python user gets the same line)."""

from __future__ import annotations

from collections.abc import Mapping

from sts_lightning.embeddings.methods.promptbert.template import Template


def check_templates(cfg: Mapping) -> None:
    """``model.template`` / ``model.template2`` (``null``: the first): empty, or without ``[X]`` / ``[MASK]``."""
    model = cfg.get("model") or {}
    for key in ("template", "template2"):
        if model.get(key) is not None or (key == "template" and key in model):
            Template(model.get(key), f"model.{key}")


def check_prompt_scorer(spec: Mapping) -> None:
    """The ``prompt`` scorer's ``template`` option in ``evaluate.py scorers=[{name: prompt, template: ...}]``."""
    if "template" in spec:
        Template(spec["template"], "scorer prompt: template")
