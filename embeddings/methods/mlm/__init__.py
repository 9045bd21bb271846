"""Masked-language-model pretraining (BERT's objective): the declaration of ``python train.py model=mlm``, whose
export (a ``BertForMaskedLM`` directory plus its pooling's sentence-transformers files) every other method takes."""

from sts_lightning.embeddings.methods.declaration import ST_EXPORT, MethodDeclaration, Paper, Tiny
from sts_lightning.embeddings.methods.rules import Rule

METHOD = MethodDeclaration(
    name="mlm", title="Masked-language-model pretraining (BERT)", kind="trained",
    summary="BERT's masked-LM objective (15%, 80/10/10, optional whole words) on packed sentences, from scratch "
            "or continued from any encoder; held-out MLM loss / accuracy logged",
    paper=Paper("BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding",
                "Jacob Devlin, Ming-Wei Chang, Kenton Lee, Kristina Toutanova", "NAACL 2019", 2019,
                "https://arxiv.org/abs/1810.04805"),
    export=ST_EXPORT, data="sentences", module="sts_lightning.lightning_modules.mlm:MLMModule",
    rules={"mlm_probability": Rule(float, 0, 1, low_open=True)},  # share of the tokens predicted
    tiny=Tiny(data=("data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8", "data.heldout_sentences=8",
                    "data.cache_dir={cache_dir}"),
              options=(("model.pack=false",), ("model.whole_word_mask=true",),
                       ("model.from_scratch={layers:1,hidden:32,heads:2,intermediate:64,max_positions:64}",)),
              ddp={"": ()}),  # MLM accuracy synced across ranks through torchmetrics
)
