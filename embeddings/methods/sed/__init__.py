"""Sentence Ensemble Distillation: its declaration (``embeddings.methods.declaration``)."""

from sts_lightning.embeddings.methods.declaration import ST_EXPORT, MethodDeclaration, Paper, Tiny

METHOD = MethodDeclaration(
    name="sed", title="Sentence Ensemble Distillation", kind="trained",
    summary="a student trained by MSE onto the mean of its teachers' vectors (each mapped onto its space)",
    paper=Paper("Sentence Embeddings by Ensemble Distillation", "Fredrik Carlsson, Magnus Sahlgren",
                "arXiv:2104.06719", 2021, "https://arxiv.org/abs/2104.06719"),
    export=ST_EXPORT, data="distillation", module="sts_lightning.lightning_modules.sed:SEDModule",
    backbones=("data.align_to", "data.teachers"),
    matryoshka_refused=("regresses the vector onto the teachers' mean by MSE; the MSE of a prefix is a subset of the "
                        "same squared differences, so Matryoshka would only weigh the leading dimensions more (the "
                        "full loss already fits every prefix to the teachers' prefix)"),
    tiny=Tiny(data=("data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8",
                    "data.teachers=[{model_dir}]",  # the tiny model teaches itself (teachers must share its size)
                    "data.cache_dir={cache_dir}"),
              options=(("model.eval_layers=3",), ("model.gradient_checkpointing=true",)),
              ddp={"": ()}),
)
