"""The pooling baselines' declaration (the method is ``pooling.py``; this module stays torch-free, see ``registry``)."""

from sts_lightning.embeddings.methods.declaration import MethodDeclaration, ScorerGroup

METHOD = MethodDeclaration(
    name="pooling", title="Pooling baselines", kind="training-free",
    summary="a pooled vector of a frozen encoder (CLS, mean, max, layer averages) compared by cosine",
    paper=None,
    # the names are pooling.POOLINGS' keys (the registry passes the name as `pooling`; a test checks them)
    scorers=(ScorerGroup(("cls", "mean", "max", "first_last_avg", "last2_avg", "last3_avg"),
                         "sts_lightning.embeddings.methods.pooling:PoolingScorer",
                         "A pooled vector compared by cosine: the baseline every method is measured against.",
                         options=("batch_size",)),),
    evaluate="python evaluate.py encoders=[all-MiniLM-L6-v2] scorers=[mean,cls,first_last_avg]",
)
