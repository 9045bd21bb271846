"""SBERT-WK's declaration (the method is ``sbert_wk.py``; this module stays torch-free, see ``registry``)."""

from sts_lightning.embeddings.methods.declaration import MethodDeclaration, Paper, ScorerGroup

METHOD = MethodDeclaration(
    name="sbert_wk", title="SBERT-WK", kind="training-free",
    summary="each token's layers fused by alignment and novelty, tokens weighted by how much they change; cosine",
    paper=Paper("SBERT-WK: A Sentence Embedding Method by Dissecting BERT-based Word Models", "Bin Wang, C.-C. Jay Kuo",
                "IEEE/ACM Transactions on Audio, Speech, and Language Processing", 2020, "https://arxiv.org/abs/2002.06652"),
    scorers=(ScorerGroup(("sbert_wk",), "sts_lightning.embeddings.methods.sbert_wk:SBERTWKScorer",
                         "SBERT-WK sentence vectors compared by cosine.",
                         options=("layer_start", "window", "omega", "variant", "batch_size")),),
    evaluate="python evaluate.py encoders=[all-MiniLM-L6-v2] scorers=[sbert_wk]",
)
