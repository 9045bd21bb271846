"""PromptBERT (Jiang et al. 2022): contrastive training on the [MASK] states of templates around each sentence.

Unsupervised (``data=sentences``): each sentence in two templates is its positive pair, every other sentence of the
global batch a negative. Each view is template-denoised (its template's own [MASK] state, computed in the same graph
and dropout mode, is subtracted), passed through SimCSE's training-only head, InfoNCE. Evaluated and exported as the
authors evaluate it: the first template's [MASK] state, no denoising, no head. Supervised (``data=nli
data.format=triplets``): one template, BERT's MLM transform as the head, kept at evaluation with denoising.

Matryoshka needs a head the evaluation keeps (``head=transform``) or none: behind the training-only head the prefixes
trained would be the head's output. Recipe defaults: the authors' ``run.sh``; sentence ids as in their ``train.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError, unknown_choice
from sts_lightning.embeddings.io.export_note import EXPORT, LoadingNote, evaluate_command
from sts_lightning.embeddings.methods.promptbert import PROMPTBERT
from sts_lightning.embeddings.methods.promptbert.head import head_for, write_prompt_export
from sts_lightning.embeddings.methods.promptbert.objective import prompt_vectors, promptbert_loss
from sts_lightning.embeddings.methods.promptbert.scorer import PromptScorer
from sts_lightning.embeddings.methods.promptbert.states import mask_pooling, template_states
from sts_lightning.embeddings.methods.promptbert.template import (
    UNSUP_BERT,
    Template,
    mask_slot,
    prefix_length,
    template_only,
    train_ids,
)
from sts_lightning.embeddings.methods.shared.batch_tokens import BatchTokenizer, batch_token_ids
from sts_lightning.embeddings.methods.shared.matryoshka import refuse_training_only_head
from sts_lightning.embeddings.methods.simcse.scorer import mlp_head
from sts_lightning.embeddings.scoring.scorer import Scorer
from sts_lightning.lightning_modules.arg_rules import check_args
from sts_lightning.lightning_modules.base import EncoderModule
from sts_lightning.lightning_modules.length_buckets import embed_length_buckets

OBJECTIVES = ("unsupervised", "supervised")
HEADS = ("mlp", "transform", "none")
FIELDS = {"unsupervised": ("sentences", "sentences"), "supervised": ("anchors", "positives", "negatives")}
DATA_OF = {"unsupervised": "plain sentences (data=sentences)", "supervised": "NLI triplets (data=nli data.format=triplets)"}
NO_ST = ("PromptBERT's vector is a template's [MASK] state, which no sentence-transformers pooling reproduces; its own "
         "module does (sts_lightning's PromptBERTEmbedding): `SentenceTransformer(\"<export>\", trust_remote_code=True)` "
         "with sts-lightning installed gives the evaluated vectors (without trust_remote_code sentence-transformers "
         "refuses the directory)")


class PromptTokenizer:
    """``sentences -> (ids in template 1, ids in template 2)`` as the authors' ``train.py``; picklable."""

    def __init__(self, tokenizer, templates: Sequence[str], max_length: int | None) -> None:
        self.tokenizer, self.templates, self.max_length = tokenizer, tuple(templates), max_length

    def __call__(self, sentences: Sequence[str]) -> tuple[list[list[int]], ...]:
        return tuple(train_ids(self.tokenizer, Template(t), sentences, self.max_length) for t in self.templates)


class PromptBERTModule(EncoderModule):
    """PromptBERT on plain sentences (two templates) or NLI triplets.

    ``template`` (one ``[X]``, one ``[MASK]``) is the anchor's and the evaluated one; ``template2`` the other views'
    (``None``: ``template``). ``head``: ``mlp`` (SimCSE's, training only), ``transform`` (BERT's MLM transform, before
    denoising, kept at evaluation and export) or ``none``. ``max_length`` counts the sentence's own tokens only.
    """

    matryoshka_ok = PROMPTBERT.matryoshka_ok
    training_only_head: ClassVar[tuple[str, str, str]] = PROMPTBERT.training_only_head
    length_buckets = 1  # at 32 tokens little padding is left to save (SimCSE's measurement, lightning_modules/simcse.py)
    method_info = PROMPTBERT.card()

    def __init__(self, model_name_or_path: str = "paraphrase-MiniLM-L3-v2", *, objective: str = "unsupervised",
                 template: str = UNSUP_BERT[0], template2: str | None = UNSUP_BERT[1], denoise: bool = True,
                 head: str = "mlp", eval_denoise: bool = False, temperature: float = 0.05,
                 hard_negative_weight: float = 0.0, max_length: int | None = 32, lr: float = 1e-5,
                 weight_decay: float = 0.0, warmup_ratio: float = 0.0, **base) -> None:
        if objective not in OBJECTIVES:
            raise unknown_choice("model.objective", objective, OBJECTIVES)
        if head not in HEADS:
            raise unknown_choice("model.head", head, HEADS)
        refuse_training_only_head(base.get("matryoshka_dims"), self.training_only_head, head)
        templates = (Template(template, "model.template"),
                     Template(template if template2 is None else template2, "model.template2"))
        check_args({"temperature": temperature})
        for key, value in (("denoise", denoise), ("eval_denoise", eval_denoise)):
            if not isinstance(value, bool):
                raise ConfigError(f"model.{key}={value!r}: use true or false")
        if not math.isfinite(hard_negative_weight) or (hard_negative_weight and objective != "supervised"):
            raise ConfigError(f"model.hard_negative_weight={hard_negative_weight!r} must be finite and needs "
                              "objective=supervised (the unsupervised objective has no hard negatives)")
        super().__init__(model_name_or_path, max_length=max_length, lr=lr, weight_decay=weight_decay,
                         warmup_ratio=warmup_ratio, **base)
        tokenizer = self.encoder.tokenizer
        if tokenizer.mask_token is None:
            raise ConfigError(f"model.model_name_or_path={model_name_or_path!r}: its tokenizer has no mask token, "
                              "which PromptBERT's templates need")
        self.templates = templates
        self.template_ids = [template_only(tokenizer, t) for t in templates]
        self.prefixes = [prefix_length(tokenizer, t) for t in templates]
        self.slots = [mask_slot(tokenizer, t) for t in templates]
        config = self.encoder_model.config
        self.head = {"mlp": lambda: mlp_head(self.embedding_dim, float(getattr(config, "initializer_range", 0.02))),
                     "transform": lambda: head_for(config), "none": lambda: None}[head]()

    text_fields = ("sentences", "anchors", "positives", "negatives")

    def prompt_tokenizer(self) -> PromptTokenizer:
        return PromptTokenizer(self.encoder.tokenizer, [t.text for t in self.templates], self.encoder.max_length)

    def batch_tokenizer(self) -> BatchTokenizer:
        """The workers make each text field's ids in both templates (``PromptTokenizer``)."""
        return BatchTokenizer(self.text_fields, self.prompt_tokenizer())

    # ------------------------------------------------------------------------------ representation
    def scorer(self) -> Scorer:
        """What the authors evaluate, by the scorer an export is loaded with."""
        hp = self.hparams
        return PromptScorer(self._live_encoder(), template=hp.template, denoise=hp.eval_denoise,
                            head=self.head if hp.head == "transform" else None, batch_size=hp.eval_batch_size)

    def view_vectors(self, ids: Sequence[Sequence[int]], which: int) -> Tensor:
        """The loss's vectors of sentences ``ids`` in template ``which`` (0 or 1), WITH gradients: one forward pass
        for the sentences, one for their distinct lengths' template-only states."""
        states = embed_length_buckets(self._live_encoder(), mask_pooling(self.slots[which]), ids, self.forward_groups())
        if not self.hparams.denoise:
            return prompt_vectors(states, head=self.head)
        base = len(self.template_ids[which])
        lengths, rows = torch.tensor([len(x) - base for x in ids]).unique(return_inverse=True)
        noise = template_states(self.encoder_model, self.template_ids[which], self.prefixes[which],
                                self.slots[which] % base, lengths)
        return prompt_vectors(states, noise, rows, self.head, head_first=self.hparams.head == "transform")

    # ------------------------------------------------------------------------------------ training
    def training_views(self, batch: dict) -> list[Tensor]:
        """One tensor of vectors per view: anchors in ``template``, the others in ``template2``."""
        objective = self.hparams.objective
        fields = FIELDS[objective]
        if fields[0] not in batch:
            raise ConfigError(f"model.objective={objective} needs {DATA_OF[objective]}; got batches with keys "
                              f"{sorted(batch)}: set data / data.format accordingly")
        made = {field: batch_token_ids(batch, field, self.prompt_tokenizer()) for field in set(fields)}
        # the views of one template in one pass, as the authors' single padded pass (view 0: template, others: template2)
        groups = [[made[fields[0]][0]], [made[field][1] for field in fields[1:]]]
        if self.templates[0].text == self.templates[1].text:
            groups = [[made[fields[0]][0], *groups[1]], []]
        views = []
        for which, lists in enumerate(groups):
            if lists:
                views += self.view_vectors([row for ids in lists for row in ids], which).split([len(x) for x in lists])
        return views

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        if not self.encoder_model.training:  # dropout is the unsupervised views' noise besides the templates
            self.encoder_model.train()
        views = self.training_views(batch)
        loss = self.with_matryoshka(self.loss_fn)(*views)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(views[0]))
        return loss

    def loss_fn(self, *views: Tensor) -> Tensor:
        """PromptBERT's InfoNCE of the views' vectors (Matryoshka: of each prefix; denoising is a per-number
        subtraction, so a prefix of the denoised vector is the denoised prefix)."""
        return promptbert_loss(list(views), self.hparams.temperature, self.hparams.hard_negative_weight)

    # -------------------------------------------------------------------------------------- export
    def write_export_files(self, folder: Path) -> str | None:
        """``promptbert_config.json``, the supervised head and a ``modules.json`` naming PromptBERT's own module."""
        hp = self.hparams
        write_prompt_export(folder, {"template": hp.template, "denoise": hp.eval_denoise, "max_length": hp.max_length},
                            self.head if hp.head == "transform" else None)
        return NO_ST

    def loading_note(self, why_not: str | None) -> LoadingNote:
        hp = self.hparams
        template = hp.template.replace("\\", "\\\\").replace("'", "\\'")
        spec = f"{{name:prompt,template:'{template}',denoise:{str(hp.eval_denoise).lower()}" + \
            (f",head:{EXPORT}}}" if hp.head == "transform" else "}")
        what = (f"{type(self).__name__}: a Hugging Face encoder (`AutoModel.from_pretrained`); sentence vector = the "
                f"last-layer state of the mask token in the template `{hp.template}` around the sentence"
                + (" through the exported BERT-transform head (`promptbert_head.safetensors`)" if hp.head == "transform"
                   else "") + (", minus the template's own state (template denoising)" if hp.eval_denoise else "")
                + ", compared by cosine.")
        return LoadingNote(what, evaluate_command([EXPORT], spec, self.encoder.max_length), why_not)
