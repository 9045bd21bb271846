"""SimCSE, unsupervised and supervised: the two declarations of this folder (``embeddings.methods.declaration``).
Only the supervised recipe (MLP kept at evaluation) needs a scorer of its own."""

from sts_lightning.embeddings.methods.declaration import (
              ST_EXPORT,
              MethodDeclaration,
              Paper,
              ScorerGroup,
              Tiny,
)

PAPER = Paper("SimCSE: Simple Contrastive Learning of Sentence Embeddings", "Tianyu Gao, Xingcheng Yao, Danqi Chen",
              "EMNLP 2021", 2021, "https://arxiv.org/abs/2104.08821")
MODULE = "sts_lightning.lightning_modules.simcse:SimCSEModule"
MLP_HEAD = ("mlp", "train", "model.mlp=none (or always)")  # the head the export drops: Matryoshka refused with it

SIMCSE = MethodDeclaration(
    name="simcse", title="SimCSE (unsupervised)", kind="trained",
    summary="each sentence twice with dropout, InfoNCE over the (DDP-gathered) batch; CLS + MLP in training only",
    paper=PAPER, export=ST_EXPORT, data="sentences", module=MODULE, matryoshka_ok=True, training_only_head=MLP_HEAD,
    tiny=Tiny(data=("data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8", "data.cache_dir={cache_dir}"),
              options=(("model.pooling=mean", "model.mlp=none"),
                       ("data=nli", "data.format=triplets", "model.objective=supervised", "model.mlp=always",
                        "model.hard_negative_weight=1.0")),
              ddp={"": ()}),  # in-batch negatives gathered across ranks
)
SIMCSE_SUP = MethodDeclaration(
    name="simcse_sup", title="SimCSE (supervised, NLI)", kind="trained",
    summary="(premise, entailed, contradicted) with the hard negative in the softmax; CLS + MLP kept "
            "(a sentence-transformers `Dense(Tanh)`)",
    paper=PAPER, export=ST_EXPORT, data="nli", module=MODULE, matryoshka_ok=True, training_only_head=MLP_HEAD,
    scorers=(ScorerGroup(("simcse_mlp",), "sts_lightning.embeddings.methods.simcse.scorer:SimCSEExportScorer",
                         "Registry entry ``{name: simcse_mlp, path: <export dir>}``: an export's encoder, pooling, "
                         "then its MLP.", options=("path", "pooling", "batch_size"), required=("path",)),),
    tiny=Tiny(data=("data.sources=[snli:dev,snli:test,sick:trial]",)),
)
METHODS = (SIMCSE, SIMCSE_SUP)
