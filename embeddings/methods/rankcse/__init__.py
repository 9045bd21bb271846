"""RankCSE: its declaration (``embeddings.methods.declaration``)."""

from sts_lightning.embeddings.methods.declaration import ST_EXPORT, MethodDeclaration, Paper, Tiny
from sts_lightning.embeddings.methods.rules import POSITIVE, POSITIVE_INT, WEIGHT, Rule
from sts_lightning.embeddings.methods.simcse import MLP_HEAD

RANKING_LOSSES = ("listnet", "listmle")  # model.ranking_loss
CONSISTENCY = ("jsd", "repo")  # model.consistency

METHOD = MethodDeclaration(
    name="rankcse", title="RankCSE", kind="trained",
    summary="unsupervised SimCSE plus listwise distillation of frozen teachers' in-batch similarity rankings "
            "(ListMLE or ListNet) and ranking consistency between the two dropout views",
    paper=Paper("RankCSE: Unsupervised Sentence Representations Learning via Learning to Rank",
                "Jiduan Liu, Jiahao Liu, Qifan Wang, Jingang Wang, Wei Wu, Yunsen Xian, Dongyan Zhao, Kai Chen, Rui Yan",
                "ACL 2023", 2023, "https://arxiv.org/abs/2305.16726"),
    export=ST_EXPORT, data="distillation", module="sts_lightning.lightning_modules.rankcse:RankCSEModule",
    rules={"teacher_weights": Rule(float, 0, low_open=True, nullable=True, each=True),  # one per teacher
           "teacher_temperature": POSITIVE,  # tau2
           "rank_temperature": Rule(float, 0, low_open=True, nullable=True),  # the student list's
           "distillation_weight": WEIGHT, "consistency_weight": WEIGHT,  # 0 turns a term off
           "pair_batch_size": POSITIVE_INT},  # a cross-encoder teacher's pairs per forward pass
    choices={"ranking_loss": RANKING_LOSSES, "consistency": CONSISTENCY},
    checks=("sts_lightning.embeddings.methods.rankcse.checks:check_teacher_weights",),
    backbones=("data.align_to", "data.teachers"),
    matryoshka_ok=True, training_only_head=MLP_HEAD,  # SimCSE's loss and head
    tiny=Tiny(data=("data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8", "data.max_sentences=64",
                    "data.teachers=[{model_dir}]",  # the tiny model teaches itself
                    "data.cache_dir={cache_dir}"),
              model=("model.teacher_weights=null",),  # one teacher here: equal weights
              options=(("model.ranking_loss=listnet", "model.consistency=repo"),
                       ("model.pooling=mean", "model.mlp=none")),
              ddp={"": ()}),  # in-batch lists gathered across ranks
)
