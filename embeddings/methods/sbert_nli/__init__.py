"""Sentence-BERT on NLI: its declaration (``embeddings.methods.declaration``)."""

from sts_lightning.embeddings.methods.declaration import ST_EXPORT, MethodDeclaration, Paper, Tiny

PAPER = Paper("Sentence-BERT: Sentence Embeddings using Siamese BERT-Networks", "Nils Reimers, Iryna Gurevych",
              "EMNLP-IJCNLP 2019", 2019, "https://arxiv.org/abs/1908.10084")

METHOD = MethodDeclaration(
    name="sbert_nli", title="Sentence-BERT (NLI)", kind="trained",
    summary="siamese softmax over (u, v, |u-v|) on NLI pairs (`model.objective=mnrl` + `data.format=triplets`: "
            "in-batch negatives)",
    paper=PAPER, export=ST_EXPORT, data="nli", module="sts_lightning.lightning_modules.sbert_nli:SBERTNLIModule",
    matryoshka_ok=True,  # mnrl only: softmax's classifier reads the full vector (refused in the constructor)
    tiny=Tiny(data=("data.sources=[snli:dev,snli:test,sick:trial]",),
              options=(("model.optimizer=rmsprop", "model.scheduler=constant"),
                       ("model.objective=mnrl", "data.format=triplets"),
                       ("model.objective=mnrl", "data.format=triplets", "model.mini_batch_size=2",
                        "trainer.precision=bf16-mixed"))),
)
