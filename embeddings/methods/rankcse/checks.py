"""RankCSE's config check, before any teacher or model loads: one weight per teacher."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sts_lightning.embeddings.errors import ConfigError


def check_teacher_weights(cfg: Mapping) -> None:
    """``model.teacher_weights`` holds one weight per ``data.teachers`` entry (``null``: equal weights)."""
    weights = (cfg.get("model") or {}).get("teacher_weights")
    teachers = (cfg.get("data") or {}).get("teachers")
    if not _is_list(weights) or not _is_list(teachers):
        return  # unset (equal weights), or a bad value the number rules name
    if len(weights) != len(teachers):
        raise ConfigError(f"model.teacher_weights has {len(weights)} weight(s) for {len(teachers)} teacher(s) "
                          f"(data.teachers): give one weight per teacher, or model.teacher_weights=null (equal)")


def _is_list(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)
