"""Supervised STS on scored pairs (CoSENT / AnglE / SBERT's cosine loss): its declaration.

The card names the paper of the configured ``objective`` (``variants``); the method keeps one name.
"""

from sts_lightning.embeddings.methods.declaration import ST_EXPORT, MethodDeclaration, Paper, Tiny
from sts_lightning.embeddings.methods.rules import POSITIVE, WEIGHT
from sts_lightning.embeddings.methods.sbert_nli import PAPER as SBERT

COSENT = Paper("CoSENT: Consistent Sentence Embedding via Similarity Ranking",
               "Xiang Huang, Hao Peng, Dongcheng Zou, Zhiwei Liu, Jianxin Li, Kay Liu, Jia Wu, Jianlin Su, Philip S. Yu",
               "IEEE/ACM Transactions on Audio, Speech, and Language Processing", 2024,
               "https://doi.org/10.1109/TASLP.2024.3402087")
ANGLE = Paper("AnglE-optimized Text Embeddings", "Xianming Li, Jing Li", "ACL 2024", 2023,
              "https://arxiv.org/abs/2309.12871")
# each objective's card title and paper
VARIANTS = {"cosent": ("CoSENT (supervised STS)", COSENT), "angle": ("AnglE (supervised STS)", ANGLE),
            "angle_full": ("AnglE, full objective (supervised STS)", ANGLE),
            "cosine": ("Sentence-BERT CosineSimilarityLoss (supervised STS)", SBERT)}

METHOD = MethodDeclaration(
    name="cosent", title="CoSENT (supervised STS)", kind="trained",
    summary="supervised STS on scored pairs: CoSENT, AnglE (`model.objective=angle`; its full objective, angle + CoSENT "
            "+ in-batch negatives: `angle_full`) or SBERT's CosineSimilarityLoss (`cosine`), each equal to its "
            "reference loss",
    paper=COSENT, export=ST_EXPORT, data="scored_pairs", module="sts_lightning.lightning_modules.cosent:CoSENTModule",
    rules={**{f"{term}_w": WEIGHT for term in ("cosine", "ibn", "angle")},  # AnglE's full objective
           **{f"{term}_tau": POSITIVE for term in ("cosine", "ibn", "angle")}},
    matryoshka_ok=True,  # the objective on each prefix of u and v
    variants=VARIANTS, choices={"objective": tuple(VARIANTS)},
    tiny=Tiny(data=("data.sources=[stsb:train,sick:trial]", "data.batch_size=4"),
              options=(("model.objective=angle",), ("model.objective=angle_full", "model.matryoshka_dims=[32,16]"),
                       ("model.objective=cosine", "model.optimizer=rmsprop", "model.scheduler=constant")),
              ddp={"": ()}),  # the CoSENT ranking gathers the similarities of both ranks (a collective every step)
)
