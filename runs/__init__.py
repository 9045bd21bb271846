"""Orchestration: ``train(cfg)``, pipelines, ``evaluate(cfg)``, trainer resolution, W&B logging, run summaries.

Why its own package: it is the top layer (it may import callbacks, lightning_modules, datamodules, sts and
embeddings); keeping it out of ``lightning_modules/`` and ``sts/`` lets those layers point only down.
"""
