"""SimCSE: the scorer this method offers the registry (see ``embeddings.methods``).

Only the supervised recipe (MLP kept at evaluation) needs one: the other SimCSE exports are a plain
pooling over the encoder (``cls`` / ``mean``) and load as such.
"""

SCORERS = {"simcse_mlp": "sts_lightning.embeddings.methods.simcse.scorer:SimCSEExportScorer"}
