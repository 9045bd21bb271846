"""Sen2Pro: its declaration (``embeddings.methods.declaration``); the scorer is ``scorer.py``."""

from sts_lightning.embeddings.methods.declaration import MethodDeclaration, Paper, ScorerGroup

METHOD = MethodDeclaration(
    name="sen2pro", title="Sen2Pro", kind="training-free",
    summary="a sentence as mean and variance over MC-dropout passes and augmentations; (1-a) l1(mu) + a l1(sigma)",
    paper=Paper("Sen2Pro: A Probabilistic Perspective to Sentence Embedding from Pre-trained Language Model",
                "Lingfeng Shen, Haiyun Jiang, Lemao Liu, Shuming Shi", "RepL4NLP @ ACL 2023", 2023,
                "https://arxiv.org/abs/2306.02247"),
    scorers=(ScorerGroup(("sen2pro",), "sts_lightning.embeddings.methods.sen2pro.scorer:Sen2ProScorer",
                         'Probabilistic sentence embedding: ``{"mean", "var"}`` per sentence, compared by Eq. 7.',
                         options=("pooling", "n_samples", "uncertainty", "alpha", "seed", "batch_size", "ops",
                                  "vocabulary", "normalize", "fast_dropout", "whitening")),),
    evaluate="python evaluate.py encoders=[all-MiniLM-L6-v2] scorers=[sen2pro]",
)
