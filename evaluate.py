"""Evaluate scorers on STS tasks: ``python evaluate.py encoders=[all-MiniLM-L6-v2] scorers=[mean,sbert_wk]``.

The card's entry point in the checkout; the command itself is :mod:`sts_lightning.evaluate` (also ``sts-evaluate``
and ``python -m sts_lightning.evaluate`` once installed), so the three are one program; see ``configs/evaluate.yaml``.
"""

from sts_lightning.evaluate import cli

if __name__ == "__main__":
    cli()
