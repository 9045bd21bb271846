"""BERT-flow: its declaration (``embeddings.methods.declaration``); the Glow is ``glow.py``, the scorer ``scorer.py``."""

from sts_lightning.embeddings.methods.declaration import MethodDeclaration, Paper, ScorerGroup, Tiny

METHOD = MethodDeclaration(
    name="flow", title="BERT-flow", kind="trained",
    summary="a Glow trained by likelihood on frozen pooled vectors; cosine of the Gaussian latents",
    paper=Paper("On the Sentence Embeddings from Pre-trained Language Models",
                "Bohan Li, Hao Zhou, Junxian He, Mingxuan Wang, Yiming Yang, Lei Li", "EMNLP 2020", 2020,
                "https://arxiv.org/abs/2011.05864"),
    export="sts-lightning/bert-flow", data="cached_embeddings",
    module="sts_lightning.lightning_modules.flow:BertFlowModule",
    scorers=(ScorerGroup(("flow",), "sts_lightning.embeddings.methods.flow.scorer:FlowExportScorer",
                         "Registry entry ``{name: flow, path: <export dir>}``: a flow export on the configured encoder.",
                         options=("path", "batch_size", "allow_other_encoder"), required=("path",)),),
    tiny=Tiny(data=("data.files=[wiki/wiki_sentences_100k.txt]", "data.cache_dir={cache_dir}"),
              options=(("model.coupling=additive", "model.permutation=reverse"),)),
)
