"""Meta-embeddings (conc / avg / SVD / GCCA / cross-view AE): the scorer this method offers the registry (see ``embeddings.methods``)."""

SCORERS = {"meta": "sts_lightning.embeddings.sources.build:MetaExportScorer"}
