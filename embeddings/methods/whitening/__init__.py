"""BERT-whitening: the scorer this method offers the registry (see ``embeddings.methods``)."""

SCORERS = {"whitening": "embeddings.methods.whitening.scorer:WhiteningExportScorer"}
