"""Turn the trainer config's ``auto`` values into what this machine has, before anything heavy loads.

``trainer.devices=8`` must mean eight accelerators (Lightning's ``auto`` falls back to eight CPU processes), and
bf16 autocast on a CPU is slower and changes results; a request this machine cannot serve is one line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.runs.compat import lightning_is_interactive

log = logging.getLogger(__name__)

GPU_NAMES = ("gpu", "cuda")
BOUNDED_DDP = "sts_lightning.runs.bounded_ddp.BoundedDDPStrategy"
DDP_NAMES = {"ddp": {}, "ddp_find_unused_parameters_true": {"find_unused_parameters": True}}
CPU_HINT = "to run N CPU processes instead (DDP over gloo, fp32): trainer.accelerator=cpu trainer.devices=N"


def requested_devices(devices: object, available: int) -> int:
    """How many devices a ``trainer.devices`` value asks for (``auto`` / ``-1``: all available, at least 1)."""
    if devices in ("auto", -1, "-1", None):
        return max(available, 1)
    if isinstance(devices, (list, tuple)) or OmegaConf.is_list(devices):
        return len(devices)  # type: ignore[arg-type]
    if isinstance(devices, str):
        if "," in devices:
            return len([d for d in devices.split(",") if d.strip()])
        devices = devices.strip()
    try:
        count = int(devices)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"trainer.devices must be a count, a list of GPU ids or 'auto', got {devices!r}") from None
    if count < 1:
        raise ConfigError(f"trainer.devices must be >= 1 (or 'auto'), got {count}")
    return count


def auto_precision(accelerator: str, bf16_supported: Callable[[], bool]) -> str:
    """``bf16-mixed`` on GPUs that support it, ``16-mixed`` on older GPUs, ``32-true`` on CPU."""
    if accelerator == "gpu":
        return "bf16-mixed" if bf16_supported() else "16-mixed"
    return "32-true"


def resolve_trainer(trainer_cfg: DictConfig, gpus: int | None = None,
                    bf16_supported: Callable[[], bool] | None = None) -> DictConfig:
    """Resolve ``accelerator`` / ``devices`` / ``precision`` in place (also returned); ``gpus``: torch's count."""
    gpus = torch.cuda.device_count() if gpus is None else int(gpus)
    bf16_supported = bf16_supported or torch.cuda.is_bf16_supported
    accelerator = str(trainer_cfg.get("accelerator", "auto")).lower()
    devices = trainer_cfg.get("devices", 1)
    wants_gpu = accelerator in GPU_NAMES
    if accelerator not in ("auto", "cpu", *GPU_NAMES):
        return trainer_cfg  # tpu / mps / a custom accelerator: Lightning decides, we do not second-guess it
    if accelerator == "auto":
        explicit = devices not in ("auto", -1, "-1", None, 1, "1")
        if gpus == 0 and explicit:
            asked = requested_devices(devices, gpus)
            raise ConfigError(f"trainer.devices={devices} asks for {asked} accelerators, but this machine has no GPU "
                              f"(CUDA not available); {CPU_HINT.replace('N', str(asked))}")
        wants_gpu = gpus > 0
    if wants_gpu:
        if gpus == 0:
            raise ConfigError(f"trainer.accelerator={accelerator} but this machine has no GPU (CUDA not available); "
                              f"use trainer.accelerator=cpu (or the default trainer, which picks what exists)")
        asked = requested_devices(devices, gpus)
        if asked > gpus:
            raise ConfigError(f"trainer.devices={devices} asks for {asked} GPUs, but this machine has {gpus}; "
                              f"use trainer.devices={gpus} or fewer, or {CPU_HINT.replace('N', str(asked))}")
    resolved = "gpu" if wants_gpu else "cpu"
    precision = str(trainer_cfg.get("precision", "auto"))
    with open_dict(trainer_cfg):
        trainer_cfg.accelerator = resolved
        if precision == "auto":
            trainer_cfg.precision = auto_precision(resolved, bf16_supported)
    if resolved == "cpu" and trainer_cfg.precision not in ("32-true", "32", 32, "64-true", "64", 64):
        log.warning("training on CPU in %s as asked (trainer.precision); the default there is 32-true",
                    trainer_cfg.precision)
    bound_collectives(trainer_cfg, requested_devices(devices, gpus if wants_gpu else 0))
    log.info("trainer: %s x %s, precision %s, strategy %s", resolved, trainer_cfg.get("devices"),
             trainer_cfg.precision, trainer_cfg.get("strategy", "auto"))
    return trainer_cfg


def bound_collectives(trainer_cfg: DictConfig, devices: int) -> None:
    """Pop ``collective_timeout_s`` (no Trainer argument) into a ``BoundedDDPStrategy`` for ``ddp`` or DDP ``auto``."""
    with open_dict(trainer_cfg):
        timeout = trainer_cfg.pop("collective_timeout_s", None)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigError(f"trainer.collective_timeout_s must be a number of seconds > 0, got {timeout!r}")
    strategy = trainer_cfg.get("strategy", "auto")
    several = devices * int(trainer_cfg.get("num_nodes", 1) or 1) > 1
    if not isinstance(strategy, str) or not (strategy in DDP_NAMES or (strategy == "auto" and several)) \
            or (strategy == "auto" and lightning_is_interactive()):  # a notebook: Lightning's auto picks ddp_notebook
        return
    node = {"_target_": BOUNDED_DDP, **DDP_NAMES.get(strategy, {})}
    if timeout is not None:
        node["collective_timeout_s"] = float(timeout)
    with open_dict(trainer_cfg):
        trainer_cfg.strategy = node
