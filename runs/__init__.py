"""Orchestration, the top layer: ``train(cfg)``, pipelines, ``evaluate(cfg)``, trainer resolution, W&B, summaries."""
