"""Evaluate scorers on STS tasks: ``python evaluate.py encoders=[all-MiniLM-L6-v2] scorers=[mean,sbert_wk]``.

Thin Hydra wrapper around :func:`sts.evaluate_run.evaluate`; see ``configs/evaluate.yaml``.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from embeddings.errors import ConfigError, DataError


@hydra.main(version_base="1.3", config_path="configs", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    from sts.evaluate_run import evaluate

    try:
        evaluate(cfg)
    except (ConfigError, DataError) as err:
        # One clear line for the user instead of a traceback from deep inside.
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
