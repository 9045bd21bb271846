"""DiffCSE: its declaration (``embeddings.methods.declaration``).

SimCSE plus conditional replaced-token detection: a frozen masked LM (the generator) edits each sentence, a
discriminator whose [CLS] input is the sentence's vector finds the edited tokens. The export is the encoder with
``cls`` pooling (the MLP, the discriminator and the generator are training devices only, as in the authors' code).
"""

from sts_lightning.embeddings.methods.declaration import ST_EXPORT, MethodDeclaration, Paper, Tiny

METHOD = MethodDeclaration(
    name="diffcse", title="DiffCSE", kind="trained",
    summary="SimCSE + lambda x replaced-token detection: a frozen masked LM edits 30% of the tokens, a "
            "discriminator conditioned on the sentence vector finds them",
    paper=Paper("DiffCSE: Difference-based Contrastive Learning for Sentence Embeddings",
                "Yung-Sung Chuang, Rumen Dangovski, Hongyin Luo, Yang Zhang, Shiyu Chang, Marin Soljacic, "
                "Shang-Wen Li, Wen-tau Yih, Yoon Kim, James Glass", "NAACL 2022", 2022,
                "https://arxiv.org/abs/2204.10298"),
    export=ST_EXPORT, data="sentences", module="sts_lightning.lightning_modules.diffcse:DiffCSEModule",
    # the generator: a masked LM over the tiny model (tests/conftest.py saves it beside the tiny model)
    tiny=Tiny(data=("data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8", "data.cache_dir={cache_dir}"),
              model=("model.generator={model_dir}-mlm",),
              options=(("model.batchnorm=false", "model.pooling=mean"),)),
)
