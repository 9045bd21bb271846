"""Devices mean accelerators: ``resolve_trainer`` on machines with 0, 1 and 2 GPUs (injected), and the CLI line."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from omegaconf import OmegaConf

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.runs.trainer_setup import resolve_trainer
from tests.paths import ROOT


def _trainer(**values):
    base = {"accelerator": "auto", "devices": 1, "strategy": "auto", "precision": "auto"}
    return OmegaConf.create({**base, **values})


def test_cpu_machine_defaults_to_one_fp32_process():
    cfg = resolve_trainer(_trainer(), gpus=0)
    assert (cfg.accelerator, cfg.devices, cfg.precision) == ("cpu", 1, "32-true")


@pytest.mark.parametrize("devices", [8, "8", [0, 1]])
def test_more_devices_than_gpus_is_one_clear_error(devices):
    with pytest.raises(ConfigError, match="no GPU") as err:
        resolve_trainer(_trainer(devices=devices), gpus=0)
    assert "trainer.accelerator=cpu trainer.devices=" in str(err.value) and "\n" not in str(err.value)


def test_gpu_count_is_checked_and_precision_follows_the_gpu():
    with pytest.raises(ConfigError, match="has 2"):
        resolve_trainer(_trainer(devices=8), gpus=2)
    assert resolve_trainer(_trainer(devices=2), gpus=2, bf16_supported=lambda: True).precision == "bf16-mixed"
    assert resolve_trainer(_trainer(), gpus=1, bf16_supported=lambda: False).precision == "16-mixed"
    assert resolve_trainer(_trainer(devices="auto"), gpus=2, bf16_supported=lambda: True).accelerator == "gpu"


def test_gpu_accelerator_without_gpu_and_bad_counts():
    with pytest.raises(ConfigError, match="no GPU"):
        resolve_trainer(_trainer(accelerator="gpu"), gpus=0)
    with pytest.raises(ConfigError, match=">= 1"):
        resolve_trainer(_trainer(accelerator="gpu", devices=0), gpus=1)


def test_cpu_processes_stay_fp32_unless_asked():
    cfg = resolve_trainer(_trainer(accelerator="cpu", devices=2, strategy="ddp"), gpus=1)
    assert (cfg.accelerator, cfg.devices, cfg.precision) == ("cpu", 2, "32-true")  # a GPU exists, cpu was asked
    assert resolve_trainer(_trainer(accelerator="cpu", precision="bf16-mixed"), gpus=0).precision == "bf16-mixed"


@pytest.mark.parametrize("group", ["ddp", "gpu"])
def test_gpu_groups_on_cpu_keep_fp32(group):
    """trainer=ddp / trainer=gpu with accelerator=cpu used to inherit bf16-mixed from gpu.yaml."""
    from hydra import compose, initialize_config_dir

    from tests.paths import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[f"trainer={group}", "trainer.accelerator=cpu"])
    assert resolve_trainer(cfg.trainer, gpus=0).precision == "32-true"


@pytest.mark.slow  # a `python train.py` subprocess: 9-14 s
@pytest.mark.skipif(torch.cuda.device_count() >= 8, reason="this machine has 8 GPUs: the command would train")
def test_headline_command_without_gpus_exits_2_with_one_line(tmp_path):
    """``python train.py model=sed trainer.devices=8`` on a machine with fewer GPUs: one line, exit 2, no traceback."""
    done = subprocess.run([sys.executable, "train.py", "model=sed", "trainer.devices=8", f"hydra.run.dir={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "trainer.devices=8" in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_ddp_gets_the_bounded_strategy_with_the_collective_timeout():
    """runs/bounded_ddp.py: a lost rank stops the others within trainer.collective_timeout_s, with one line."""
    cfg = resolve_trainer(_trainer(accelerator="cpu", devices=2, strategy="ddp", collective_timeout_s=60), gpus=0)
    assert dict(cfg.strategy) == {"_target_": "sts_lightning.runs.bounded_ddp.BoundedDDPStrategy",
                                  "collective_timeout_s": 60.0}
    assert "collective_timeout_s" not in cfg  # not a Trainer argument
    several = resolve_trainer(_trainer(accelerator="cpu", devices=1, num_nodes=2, collective_timeout_s=9), gpus=0)
    assert several.strategy["_target_"].endswith("BoundedDDPStrategy")  # auto over two nodes: DDP
    unused = resolve_trainer(_trainer(devices=2, strategy="ddp_find_unused_parameters_true"), gpus=2,
                             bf16_supported=lambda: True)
    assert unused.strategy["find_unused_parameters"] is True
    assert resolve_trainer(_trainer(collective_timeout_s=60), gpus=0).strategy == "auto"  # one process
    assert resolve_trainer(_trainer(devices=2, strategy="fsdp"), gpus=2, bf16_supported=lambda: True).strategy == "fsdp"


@pytest.mark.parametrize("timeout", [0, -5, "abc", True])
def test_a_bad_collective_timeout_is_one_line(timeout):
    with pytest.raises(ConfigError, match="trainer.collective_timeout_s must be a number of seconds > 0"):
        resolve_trainer(_trainer(accelerator="cpu", devices=2, strategy="ddp", collective_timeout_s=timeout), gpus=0)

