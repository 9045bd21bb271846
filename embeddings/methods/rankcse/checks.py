"""RankCSE's config check, before any teacher or model loads: one weight per teacher."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sts_lightning.embeddings.errors import ConfigError


def check_teacher_weights(cfg: Mapping) -> None:
    """``model.teacher_weights`` holds one weight per ``data.teachers`` entry, then per ``model.pair_teachers`` entry
    (``null``: equal weights)."""
    model = cfg.get("model") or {}
    weights, pairs = model.get("teacher_weights"), model.get("pair_teachers") or []
    teachers = (cfg.get("data") or {}).get("teachers", [])
    if not _is_list(weights) or not _is_list(teachers) or not _is_list(pairs):
        return  # unset (equal weights), or a bad value the number rules name
    count = len(teachers) + len(pairs)
    if len(weights) != count:
        where = "data.teachers, then model.pair_teachers" if pairs else "data.teachers"
        raise ConfigError(f"model.teacher_weights has {len(weights)} weight(s) for {count} teacher(s) "
                          f"({where}): give one weight per teacher, or model.teacher_weights=null (equal)")


def _is_list(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)
