"""BERT-whitening: the scorer this method offers the registry (see ``embeddings.methods``)."""

SCORERS = {"whitening": "sts_lightning.embeddings.methods.whitening.scorer:WhiteningExportScorer"}
