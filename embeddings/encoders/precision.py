"""``encoder.precision``: the number format a frozen transformer encodes in (``fp32`` | ``bf16`` | ``fp16``).

Token states are handed out in fp32, so poolings and similarities are fp32 and caches key on the precision; fp16 on a
CPU is refused, bf16 on a CPU without native bf16 (emulated, slower) falls back to fp32 with a warning."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import torch

from sts_lightning.embeddings.errors import ConfigError

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")

log = logging.getLogger(__name__)


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (x86 ``avx512_bf16`` / AMX; read from ``/proc/cpuinfo``)."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return False  # macOS / Windows: not detected, so treated as emulated (fp32 fallback with a warning)
    flags = next((line for line in cpuinfo.read_text().splitlines() if line.startswith("flags")), "")
    return any(flag in flags.split() for flag in CPU_BF16_FLAGS)


def resolve_precision(precision: str | None, device: torch.device) -> str:
    """The precision an encoder on ``device`` will use for ``precision`` (``None`` = fp32); ConfigError when unusable."""
    name = str(precision or "fp32").lower()
    if name not in PRECISIONS:
        raise ConfigError(f"encoder.precision={precision!r} is not one of {', '.join(PRECISIONS)}")
    if name == "fp32":
        return name
    if device.type == "cuda":
        if name == "bf16" and not torch.cuda.is_bf16_supported():
            raise ConfigError(f"encoder.precision=bf16 but {torch.cuda.get_device_name(device)} has no bf16; "
                              "use encoder.precision=fp16 or fp32")
        return name
    if device.type != "cpu":
        return name  # mps and others: the backend decides
    if name == "fp16":
        raise ConfigError("encoder.precision=fp16 is not supported on a CPU (no fast fp16 kernels, and fp16 "
                          "overflows); use bf16 on a CPU with avx512_bf16 / AMX, or fp32")
    if not cpu_has_native_bf16():
        log.warning("encoder.precision=bf16: this CPU has no native bf16 (%s), where bf16 is emulated and slower "
                    "than fp32; encoding in fp32", "/".join(CPU_BF16_FLAGS))
        return "fp32"
    return name


def dtype_of(precision: str) -> torch.dtype:
    return PRECISIONS[precision]


def key_entry(precision: str) -> dict:
    """What a cache of encoder outputs adds to its key for ``precision``: nothing for fp32, so the fp32 caches
    written before precisions existed stay valid; ``{"precision": ...}`` otherwise."""
    return {} if precision == "fp32" else {"precision": precision}
