"""BERT-whitening: its declaration (``embeddings.methods.declaration``); maths in ``maths.py``, scorer ``scorer.py``."""

from sts_lightning.embeddings.methods.declaration import MethodDeclaration, Paper, ScorerGroup, Tiny

SENTENCES = ("data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8", "data.cache_dir={cache_dir}")

METHOD = MethodDeclaration(
    name="whitening", title="BERT-whitening", kind="trained",
    summary="mean and W = U diag(1/sqrt(s)) of the covariance of frozen pooled vectors, first `k` columns; "
            "one pass, no gradient step",
    paper=Paper("Whitening Sentence Representations for Better Semantics and Faster Retrieval",
                "Jianlin Su, Jiarun Cao, Weijie Liu, Yangyiwen Ou", "arXiv", 2021, "https://arxiv.org/abs/2103.15316"),
    export="sts-lightning/whitening", data="cached_embeddings",
    module="sts_lightning.lightning_modules.whitening:WhiteningModule",
    scorers=(ScorerGroup(("whitening",), "sts_lightning.embeddings.methods.whitening.scorer:WhiteningExportScorer",
                         "Registry entry ``{name: whitening, path: <export dir>}``: an export on the configured encoder.",
                         options=("path", "batch_size", "allow_other_encoder"), required=("path",)),),
    # the moments are all-reduced across ranks: its DDP test checks both ranks' batches were summed
    # recipes keep k=256 columns, the tiny BERT has 32: all of them (an unfitted export keeps k, its live scorer
    # is the plain pooling); the option set runs a k below the width
    tiny=Tiny(data=SENTENCES, model=("model.k=null",), options=(("model.k=8", "model.pooling=mean"),), ddp={"": ()}),
)
