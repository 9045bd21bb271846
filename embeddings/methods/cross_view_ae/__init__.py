"""The cross-view autoencoder meta-embedding: its declaration (``embeddings.methods.declaration``).

A folder of its own although its nets and export live in ``meta/``: it is the meta-embedding that ``train.py``
trains (``model=cross_view_ae``, ``lightning_modules/cross_view_ae.py``), so it has the same name in every
layer; its exports are meta-embedding exports, scored by ``meta``'s scorer.
"""

from sts_lightning.embeddings.methods.declaration import MethodDeclaration, Tiny
from sts_lightning.embeddings.methods.meta import METHOD as META

METHOD = MethodDeclaration(
    name="cross_view_ae", title="Cross-view autoencoder meta-embedding", kind="trained",
    summary="an encoder and decoder per frozen source, every view rebuilt from every code; the codes summed",
    paper=META.paper, export=META.export, data="source_views",
    module="sts_lightning.lightning_modules.cross_view_ae:CrossViewAEModule", backbones=("data.sources",),
    tiny=Tiny(data=("data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8",
                    "data.sources=[{model_dir},{model:{model_dir},pooling:cls}]", "data.cache_dir={cache_dir}"),
              model=("model.dims=[32,32]",),  # two tiny sources of the same model: mean and CLS pooling
              options=(("model.loss=cos2", "model.hidden_layers=1"),)),
)
