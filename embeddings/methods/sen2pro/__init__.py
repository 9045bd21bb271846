"""Sen2Pro: the scorer this method offers the registry (see ``embeddings.methods``)."""

SCORERS = {"sen2pro": "sts_lightning.embeddings.methods.sen2pro.scorer:Sen2ProScorer"}
