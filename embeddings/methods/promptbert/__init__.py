"""PromptBERT (Jiang et al. 2022): the declarations of the training-free ``prompt`` scorer and ``model=promptbert``,
whose export (the encoder, and the supervised recipe's head) that scorer evaluates with its training template."""

from sts_lightning.embeddings.methods.declaration import (
    MethodDeclaration,
    Paper,
    ScorerGroup,
    Tiny,
)

PAPER = Paper("PromptBERT: Improving BERT Sentence Embeddings with Prompts",
              "Ting Jiang, Jian Jiao, Shaohan Huang, Zihan Zhang, Deqing Wang, Fuzhen Zhuang, Furu Wei, Haizhen Huang, "
              "Denvy Deng, Qi Zhang", "EMNLP 2022", 2022, "https://arxiv.org/abs/2201.04337")

PROMPT = MethodDeclaration(
    name="prompt", title="PromptBERT prompt vector (training-free)", kind="training-free",
    summary="the [MASK] state of a template around the sentence, optionally template-denoised; cosine",
    paper=PAPER,
    scorers=(ScorerGroup(("prompt",), "sts_lightning.embeddings.methods.promptbert.scorer:PromptScorer",
                         "The [MASK] state of a template around the sentence (PromptBERT), compared by cosine; "
                         "any encoder whose tokenizer has a mask token.",
                         options=("template", "denoise", "head", "add_period", "batch_size"),
                         check="sts_lightning.embeddings.methods.promptbert.checks:check_prompt_scorer"),),
    evaluate="python evaluate.py 'scorers=[prompt,{name:prompt,denoise:true}]'",
)
PROMPTBERT = MethodDeclaration(
    name="promptbert", title="PromptBERT", kind="trained",
    summary="a sentence in two templates is the positive pair: denoised [MASK] states, InfoNCE (NLI: "
            "`model.objective=supervised`)",
    paper=PAPER, export="sts-lightning/promptbert", data="sentences",
    module="sts_lightning.lightning_modules.promptbert:PromptBERTModule",
    checks=("sts_lightning.embeddings.methods.promptbert.checks:check_templates",),
    matryoshka_ok=True,  # InfoNCE on each prefix of the views' vectors (head=none / transform)
    training_only_head=("head", "mlp", "model.head=none (or transform, the supervised recipe's, kept at evaluation)"),
    tiny=Tiny(data=("data.files=[wiki/wiki_sentences_100k.txt]", "data.batch_size=8", "data.cache_dir={cache_dir}"),
              model=("model.template='the [X] is [MASK] .'", "model.template2='a [X] is [MASK] .'"),
              options=(("model.denoise=false", "model.head=none"),
                       ("data=nli", "data.format=triplets", "model.objective=supervised", "model.head=transform",
                        "model.eval_denoise=true", "model.template2=null")),
              ddp={"": ()}),
)
METHODS = (PROMPT, PROMPTBERT)
