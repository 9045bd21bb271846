"""Read the records of an offline W&B run (``run-<id>.wandb``), to test what ``wandb sync`` would upload.

Why our own reader: wandb 0.31 moved its record store to the Go core and ships no Python reader, yet
what an offline run will upload (config, artifact manifests) exists only in that file. The format is
small and stable: a 7-byte header (``:W&B``, magic, version), then a LevelDB log: 32 KiB blocks of
chunks, each a 7-byte header (crc32, length, type) and a piece of one serialized ``Record`` protobuf.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

FILE_HEADER = 7
BLOCK = 32768
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _payloads(data: bytes) -> Iterator[bytes]:
    """Reassemble the chunked payloads; block tails shorter than a chunk header are padding."""
    pos, pending = FILE_HEADER, b""
    while pos + CHUNK_HEADER <= len(data):
        room = BLOCK - pos % BLOCK
        if room < CHUNK_HEADER:
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + CHUNK_HEADER])
        if kind == 0 and length == 0:  # zero-filled rest of a block
            pos += room
            continue
        chunk = data[pos + CHUNK_HEADER:pos + CHUNK_HEADER + length]
        pos += CHUNK_HEADER + length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk
        else:
            raise ValueError(f"unknown chunk type {kind} at byte {pos}")


def read_records(path: Path) -> list:
    """Every ``wandb_internal_pb2.Record`` of a ``.wandb`` file, in write order."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    if not data.startswith(b":W&B"):
        raise ValueError(f"{path} is not a W&B run file")
    records = []
    for payload in _payloads(data):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        records.append(record)
    return records


def offline_run_file(wandb_dir: Path) -> Path:
    """The one ``run-<id>.wandb`` under ``wandb_dir`` (an offline run's directory is ``offline-run-*``)."""
    files = sorted(Path(wandb_dir).rglob("offline-run-*/run-*.wandb"))
    if len(files) != 1:
        raise AssertionError(f"expected one offline run under {wandb_dir}, found {files}")
    return files[0]


def read_finished_run(path: Path, timeout: float = 30.0) -> list:
    """The records once the run's ``exit`` record is on disk.

    Why wait: ``wandb.finish()`` returns before the core process has flushed the file (seen with 0.31:
    7 bytes right after, the whole log half a second later), so poll, tolerating a half-written tail.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            records = read_records(path)
        except Exception:  # noqa: BLE001  (a chunk cut mid-write fails to parse; read again)
            records = []
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.1)
