"""Latte-Mix (and the token VAE baselines): the scorer this method offers the registry (see ``embeddings.methods``)."""

SCORERS = {"latte_mix": "sts_lightning.embeddings.methods.latte_mix.scorer:LatteMixExportScorer"}
