"""Contrastive Tension: its declaration (``embeddings.methods.declaration``)."""

from sts_lightning.embeddings.methods.declaration import ST_EXPORT, MethodDeclaration, Paper, Tiny
from sts_lightning.embeddings.methods.rules import POSITIVE_INT, Rule

METHOD = MethodDeclaration(
    name="ct", title="Contrastive Tension", kind="trained",
    summary="two copies of the encoder, dot-product BCE on identical vs random pairs, the better copy exported "
            "(`model.objective=in_batch`, `model.views=halves`)",
    paper=Paper("Semantic Re-tuning with Contrastive Tension",
                "Fredrik Carlsson, Amaru Cuba Gyllensten, Evangelia Gogoulou, Erik Ylipää Hellqvist, Magnus Sahlgren",
                "ICLR 2021", 2021, "https://openreview.net/forum?id=Ov_sMNau-PF"),
    export=ST_EXPORT, data="sentences", module="sts_lightning.lightning_modules.ct:ContrastiveTensionModule",
    rules={"embedding_lr": Rule(float, 0, low_open=True, nullable=True), "length_groups": POSITIVE_INT},
    matryoshka_ok=True,  # both objectives on each (normalised) prefix, as sentence-transformers
    tiny=Tiny(
        data=("data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8", "data.cache_dir={cache_dir}"),
        model=("model.pairs=8", "model.positives=2"),
        options=(("model.scheduler=linear", "model.optimizer=adamw"),
                 ("model.objective=in_batch", "model.dropout=true"),
                 ("model.objective=in_batch", "model.dropout=true", "model.mini_batch_size=4",
                  "model.gradient_checkpointing=true"),
                 ("model.gradient_checkpointing=true",),
                 ("model.views=halves",),
                 ("model.views=mixed_halves", "model.objective=in_batch", "model.length_groups=2"),
                 ("model.views=halves", "model.embedding_lr=1e-3", "model.frozen_layers=0"),
                 ("model.views=mixed_halves", "model.objective=in_batch", "model.optimizer=adamw",
                  "model.trainable=word_embeddings", "model.scheduler=constant")),
        # in-batch negatives gathered across ranks, and the cached in-batch loss (GradCache surrogate) through
        # Lightning's DDP wrapper and optimizer loop
        ddp={"": (), "_cached": ("model.objective=in_batch", "model.dropout=true", "model.mini_batch_size=2",
                                 "model.gradient_checkpointing=true")}),
    aliases=("contrastive_tension",),  # the module's name before issue 17, in older run directories' saved configs
)
