"""The cross-encoder (one transformer reads both sentences of a pair): its declaration.

A method of the pair kind: it scores pairs, not sentences (``embeddings.scoring.scorer.PairScorer``), so the STS
callback shards pairs across ranks, ``evaluate.py`` / ``sts_lightning.load`` score it with the ``cross_encoder``
scorer, and its export is a ``sentence_transformers.CrossEncoder`` directory (``CE_EXPORT``).
"""

from sts_lightning.embeddings.methods.declaration import (
             CE_EXPORT,
             MethodDeclaration,
             Paper,
             ScorerGroup,
             Tiny,
)

BERT = Paper("BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding",
             "Jacob Devlin, Ming-Wei Chang, Kenton Lee, Kristina Toutanova", "NAACL 2019", 2019,
             "https://arxiv.org/abs/1810.04805")
HERE = "sts_lightning.embeddings.methods.cross_encoder"

METHOD = MethodDeclaration(
    name="cross_encoder", title="Cross-encoder (supervised STS)", kind="trained",
    summary="both sentences through one transformer (`[CLS] a [SEP] b [SEP]`), a score head (BCE; `model.objective=mse`) "
            "or NLI head (`nli`); scores pairs, not sentences",
    paper=BERT, export=CE_EXPORT, data="scored_pairs",
    module="sts_lightning.lightning_modules.cross_encoder:CrossEncoderModule",
    scorers=(ScorerGroup(("cross_encoder",), f"{HERE}.scorer:CrossEncoderScorer",
                         "a cross-encoder directory (our export, a sentence-transformers CrossEncoder or a Hugging Face "
                         "sequence-classification model) scoring each pair jointly; no encoder (encoders=[none])",
                         options=("path", "batch_size", "max_length", "device"), required=("path",),
                         encoder_free=True),),
    checks=(f"{HERE}.checks:check_objective_data",),
    tiny=Tiny(data=("data.sources=[stsb:train,sick:trial]", "data.batch_size=4"),
              options=(("model.objective=mse", "model.optimizer=rmsprop", "model.scheduler=constant"),
                       ("model.objective=nli", "data=nli")),
              ddp={"": ()}),  # the STS callback shards the pairs over the ranks and gathers their scores
)
