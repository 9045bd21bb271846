"""The export directory of every method that is not a sentence-transformers model: one JSON + one safetensors.

``{"format": <tag>, "version": <n>, ...config}`` beside a tensor file (an ``ExportFormat``), plus the refusal
``modules.json``. File names and JSON layout are the first exports' (``test_legacy_exports.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.io.disk_full import payload_bytes
from sts_lightning.embeddings.io.export_manifest import export_directory, verify_export
from sts_lightning.embeddings.io.model_card import ExportNotes
from sts_lightning.embeddings.io.st_refusal import write_refusal


@dataclass(frozen=True)
class ExportFormat:
    """What identifies one export format: its tag, version, file names and a name for messages."""

    tag: str
    version: int
    config_file: str
    weights_file: str
    what: str

    def describe(self, path: str | os.PathLike) -> str:
        """How messages name an export: ``BERT-flow export <dir>/flow_config.json`` (the file to look into)."""
        return f"{self.what} export {Path(path).expanduser() / self.config_file}"


def save_export(path: str | os.PathLike, fmt: ExportFormat, config: Mapping, tensors: Mapping,
                note: ExportNotes | None = None) -> Path:
    """Write ``fmt.config_file`` (the tag, version, then ``config`` in its own order), ``fmt.weights_file``, the
    ``note`` and the manifest, atomically."""
    from safetensors.torch import save_file

    target = Path(path)
    with export_directory(target, needed=payload_bytes(dict(tensors))) as tmp:
        save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(tmp / fmt.weights_file))
        meta = {"format": fmt.tag, "version": fmt.version, **dict(config)}
        (tmp / fmt.config_file).write_text(json.dumps(meta, indent=2))
        write_refusal(tmp, f"it is a {fmt.what} export ({fmt.tag}), scored by its own scorer on the encoder it "
                           f"was fitted on ({fmt.config_file})")
        if note is not None:
            note.write(tmp, shown_as=target)
    return target


def load_export_config(path: str | os.PathLike, fmt: ExportFormat) -> dict:
    """The JSON config of an export directory; ``ConfigError`` when missing or of another format or version,
    ``DataError`` when a file differs from the manifest."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a {fmt.what} export: no such directory")
    verify_export(folder)
    file = folder / fmt.config_file
    if not file.is_file():
        raise ConfigError(f"{folder} is not a {fmt.what} export: no {fmt.config_file}")
    try:
        config = json.loads(file.read_text())
    except ValueError as err:
        raise ConfigError(f"{file}: not valid JSON ({err})") from err
    if not isinstance(config, dict) or config.get("format") != fmt.tag or config.get("version") != fmt.version:
        got = config if not isinstance(config, dict) else f"format {config.get('format')!r} v{config.get('version')}"
        raise ConfigError(f"{file}: {got}, expected {fmt.tag!r} v{fmt.version}")
    return config


def load_export(path: str | os.PathLike, fmt: ExportFormat) -> tuple[dict, dict]:
    """``(config, tensors)`` of an export directory (tensors on the CPU); errors as ``load_export_config``."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    config = load_export_config(path, fmt)
    weights = Path(path).expanduser() / fmt.weights_file
    if not weights.is_file():
        raise ConfigError(f"{Path(path)} is an incomplete {fmt.what} export: no {fmt.weights_file}")
    try:
        return config, load_file(str(weights))
    except (SafetensorError, OSError) as err:  # an export without a manifest (older) can still be damaged
        raise DataError(f"{weights}: unreadable {fmt.what} weights ({err}); export it again") from None
