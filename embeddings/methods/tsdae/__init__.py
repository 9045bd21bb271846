"""TSDAE: its declaration (``embeddings.methods.declaration``); the decoder is not exported, as in
sentence-transformers' TSDAE."""

from sts_lightning.embeddings.methods.declaration import ST_EXPORT, MethodDeclaration, Paper, Tiny

METHOD = MethodDeclaration(
    name="tsdae", title="TSDAE (denoising auto-encoder)", kind="trained",
    summary="words deleted (p 0.6), the noisy sentence's vector decoded back to the original by a tied "
            "cross-attending decoder; the encoder alone exported",
    paper=Paper("TSDAE: Using Transformer-based Sequential Denoising Auto-Encoder for Unsupervised Sentence "
                "Embedding Learning", "Kexin Wang, Nils Reimers, Iryna Gurevych", "Findings of EMNLP 2021", 2021,
                "https://arxiv.org/abs/2104.06979"),
    export=ST_EXPORT, data="sentences", module="sts_lightning.lightning_modules.tsdae:TSDAEModule",
    tiny=Tiny(data=("data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8", "data.cache_dir={cache_dir}"),
              options=(("model.tie_decoder=false", "model.pooling=mean"),
                       ("model.deletion_ratio=0.0", "model.gradient_checkpointing=true")),
              # no cross-rank loss, but the tied decoder's shared parameters go through DDP's reducer (ranks draw
              # different noise: tests/lightning_modules/test_tsdae.py)
              ddp={"": ()}),
)
