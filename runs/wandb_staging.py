"""A snapshot of the export directory inside the W&B run directory, under the export's own file names.

Why not wandb's default (``artifact.add_dir(export)``, policy "mutable"): it copies every file into
``<WANDB_DATA_DIR>/artifacts/staging`` under a ``tmpXXXXXXXX`` name, so an offline run held a second,
unreadable 68 MB copy of a MiniLM export. Why not ``policy="immutable"`` on the export itself: the manifest
would point into ``<output_dir>/export``, which a resumed run replaces before ``wandb sync`` uploads it.

Here each file is hard-linked (a copy where the file system has no hard links, or the run directory sits
on another one) to ``<run dir>/artifacts/staging/<artifact name>/<path in the export>`` and added with
``policy="immutable"``: readable names, no extra disk, and a true snapshot, because the export is only
ever replaced by a rename (``embeddings.io.atomic.atomic_directory``), which leaves the linked files as
they were.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def fresh_dir(base: Path) -> Path:
    """``base``, or ``base.1``, ``base.2``, ... whichever does not exist yet (an earlier version keeps its files)."""
    candidate, n = base, 0
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}.{n}")
    return candidate


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard link ``src`` at ``dst``; a copy with the same name where links cannot be made."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:  # another file system, or one without hard links
        shutil.copy2(src, dst)


def snapshot(export_dir: Path, staging: Path) -> list[tuple[str, Path]]:
    """``(name in the artifact, staged file)`` for every file of ``export_dir``, staged under ``staging``.

    Names are the paths inside the export (``model.safetensors``, ``1_Pooling/config.json``), so the
    artifact downloads as the same directory that ``SentenceTransformer(path)`` loads.
    """
    target = fresh_dir(staging)
    staged = []
    for src in sorted(p for p in Path(export_dir).rglob("*") if p.is_file()):
        name = src.relative_to(export_dir).as_posix()
        link_or_copy(src, target / name)
        staged.append((name, target / name))
    return staged
