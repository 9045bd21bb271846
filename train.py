"""Train a method: ``python train.py model=sbert_nli data=nli trainer=gpu``.

The card's entry point in the checkout; the command itself is :mod:`sts_lightning.train` (also ``sts-train`` and
``python -m sts_lightning.train`` once installed), so the three are one program; see ``configs/train.yaml``.
"""

from sts_lightning.train import cli

if __name__ == "__main__":
    cli()
