"""Short names of a training run (method, backbone, experiment): W&B group and tags, comparison-table labels.

Why one place: the W&B group/tags of a live run and the labels ``runs.compare_runs`` gives a finished run
directory must agree, or the offline table and the W&B dashboard name the same run differently.
Plain mappings in, strings out (no Hydra, no Lightning), so both a live config and a saved
``.hydra/config.yaml`` can be labelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath

from sts_lightning.embeddings.methods.registry import aliases


def method_name(model: Mapping) -> str:
    """``sbert_nli``, ``ct``, ``flow``, ``latte_mix``, ``sed``, ``cross_view_ae`` (the model config's name).

    Derived from ``model._target_`` rather than Hydra's choice of the ``model`` group because the target
    is saved in every config (also one composed in a test or a pipeline stage), the choice is not. A module's
    former name (``contrastive_tension``, still in the saved ``.hydra/config.yaml`` of older run directories) maps
    to the method through the declarations' ``aliases``.
    """
    target = str(model.get("_target_") or "")
    parts = target.split(".")
    module = parts[-2] if len(parts) >= 2 else target
    return aliases().get(module, module) or "unknown"


def short_name(spec: object) -> str:
    """The last path component of a model name or path: ``sentence-transformers/all-MiniLM-L6-v2`` ->
    ``all-MiniLM-L6-v2``; an export directory keeps its parent (``seed0/export``), "export" alone says nothing."""
    path = PurePath(str(spec).rstrip("/"))
    if path.name == "export" and path.parent.name:
        return f"{path.parent.name}/export"
    return path.name or str(spec)


def backbone_names(model: Mapping) -> list[str]:
    """The encoder a method starts from, or the frozen sources of a meta-embedding (cross-view AE)."""
    path = model.get("model_name_or_path")
    specs = [path] if path else list(model.get("sources") or [])
    return [short_name(s) for s in specs]


def run_tags(model: Mapping) -> list[str]:
    """Method first, then backbone(s), without duplicates (W&B tags are a set)."""
    return list(dict.fromkeys([method_name(model), *backbone_names(model)]))


def run_group(model: Mapping, experiment: str | None) -> str:
    """The experiment's name as typed (``ct/minilm_l3`` for ``configs/experiment/ct/minilm_l3.yaml``), else the
    method: seeds of one recipe group. W&B takes any string up to 128 characters as a group (only run ids
    forbid ``/``), so the name is kept as the command line spells it."""
    return str(experiment) if experiment else method_name(model)
