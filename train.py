"""Train a method: ``python train.py model=sbert_nli data=nli trainer=gpu``.

Thin Hydra wrapper around :func:`lightning_modules.train_run.train`; see ``configs/train.yaml``.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from embeddings.errors import ConfigError, DataError


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    from lightning_modules.train_run import train

    try:
        train(cfg)
    except (ConfigError, DataError) as err:
        # One clear line for the user instead of a traceback from deep inside.
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
