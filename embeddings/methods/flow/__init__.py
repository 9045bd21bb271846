"""BERT-flow: the scorer this method offers the registry (see ``embeddings.methods``)."""

SCORERS = {"flow": "embeddings.methods.flow.scorer:FlowExportScorer"}
