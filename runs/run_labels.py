"""Short names of a training run (method, backbone, experiment): W&B group and tags, comparison-table labels.

One place, so W&B and ``runs.compare_runs`` name a run alike, from a live config or a saved one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath

from sts_lightning.embeddings.methods.registry import aliases


def method_name(model: Mapping) -> str:
    """The method's declared name, from ``model._target_`` (saved in every config, unlike Hydra's group choice)."""
    target = str(model.get("_target_") or "")
    parts = target.split(".")
    module = parts[-2] if len(parts) >= 2 else target
    return aliases().get(module, module) or "unknown"


def short_name(spec: object) -> str:
    """The last path component of a model name or path; an export directory keeps its parent (``seed0/export``)."""
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
    """The experiment's name as typed (``<method>/minilm_l3``), else the method: seeds of one recipe group."""
    return str(experiment) if experiment else method_name(model)
