"""DiffCSE: its declaration (``embeddings.methods.declaration``); the export is the encoder with ``cls`` pooling (the
MLP, the discriminator and the generator are training devices only, as in the authors' code)."""

from sts_lightning.embeddings.methods.declaration import ST_EXPORT, MethodDeclaration, Paper, Tiny
from sts_lightning.embeddings.methods.rules import WEIGHT, Rule
from sts_lightning.embeddings.methods.simcse import MLP_HEAD

METHOD = MethodDeclaration(
    name="diffcse", title="DiffCSE", kind="trained",
    summary="SimCSE + lambda x replaced-token detection: a frozen masked LM edits 30% of the tokens, a "
            "discriminator conditioned on the sentence vector finds them",
    paper=Paper("DiffCSE: Difference-based Contrastive Learning for Sentence Embeddings",
                "Yung-Sung Chuang, Rumen Dangovski, Hongyin Luo, Yang Zhang, Shiyu Chang, Marin Soljacic, "
                "Shang-Wen Li, Wen-tau Yih, Yoon Kim, James Glass", "NAACL 2022", 2022,
                "https://arxiv.org/abs/2204.10298"),
    export=ST_EXPORT, data="sentences", module="sts_lightning.lightning_modules.diffcse:DiffCSEModule",
    rules={"lambda_weight": WEIGHT,  # the replaced-token detection loss's weight
           "masking_ratio": Rule(float, 0, 1, low_open=True, high_open=True)},  # share of the tokens edited
    checks=("sts_lightning.embeddings.methods.diffcse.generator_check:check_generator",),
    backbones=("model.generator",), matryoshka_ok=True, training_only_head=MLP_HEAD,  # SimCSE's loss and head
    # the generator: a masked LM over the tiny model (tests/conftest.py saves it beside the tiny model)
    tiny=Tiny(data=("data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8", "data.cache_dir={cache_dir}"),
              model=("model.generator={model_dir}-mlm",),
              options=(("model.batchnorm=false", "model.pooling=mean"),)),
)
