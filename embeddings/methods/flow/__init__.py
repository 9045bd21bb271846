"""BERT-flow: the scorer this method offers the registry (see ``embeddings.methods``)."""

SCORERS = {"flow": "sts_lightning.embeddings.methods.flow.scorer:FlowExportScorer"}
