"""The two sides of the training benchmark: our LightningModule's step and sentence-transformers' loss step.

Why its own file: ``benchmarks/speed/train_speed.py`` is the loop and the report; what one optimizer step of each side
is lives here, method by method. Ours: the loader's collate (timed as tokenize) + ``module.training_step`` +
backward + optimizer, under bf16 autocast for ``bf16-mixed`` as Lightning does. Theirs: ``st.tokenize`` + the
sentence-transformers loss (``ContrastiveTensionLoss``, ``SoftmaxLoss``, ``MultipleNegativesRankingLoss``,
``CoSENTLoss``; for MLM, which has none, transformers' ``BertForMaskedLM`` with its collator) + backward + the same
optimizer type and learning rate. Dropout and optimizers follow each recipe (CT: dropout off, RMSprop).
"""

from __future__ import annotations

import time
from collections import defaultdict

import torch

from benchmarks.speed.train_batches import ct_pairs
from benchmarks.tools.device_timing import CPU, synchronize
from sts_lightning.lightning_modules.cosent import CoSENTModule
from sts_lightning.lightning_modules.ct import ContrastiveTensionModule
from sts_lightning.lightning_modules.mlm import MLMModule
from sts_lightning.lightning_modules.optimizers import adam
from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule
from sts_lightning.lightning_modules.simcse import SimCSEModule, set_dropout

PHASES = ("tokenize", "forward+loss", "backward", "optimizer")


def param_groups(module: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Decay on matrices only (biases and LayerNorm weights are 1-D), as ``EncoderModule._param_groups``."""
    params = [p for p in module.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]


def make_optimizer(kind: str, module: torch.nn.Module) -> torch.optim.Optimizer:
    if kind != "ct":  # fused: our modules' AdamW and sentence-transformers' trainer default (adamw_torch_fused)
        return adam(param_groups(module, 0.01), lr=2e-5, decoupled=True)
    return torch.optim.RMSprop(param_groups(module, 0.0), lr=1e-5, alpha=0.9, eps=1e-7)


class Clock:
    """Per-phase seconds of the current step; ``wrap`` times a callable into the ``tokenize`` phase."""

    def __init__(self) -> None:
        self.split: dict[str, float] = defaultdict(float)

    def wrap(self, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            self.split["tokenize"] += time.perf_counter() - t0
            return out
        return timed


def our_module(kind: str, path: str, max_length: int, batch_size: int):
    if kind in ("nli", "mnrl"):
        return SBERTNLIModule(path, pooling="mean", max_length=max_length, objective="mnrl" if kind == "mnrl" else "softmax")
    if kind == "cosent":
        return CoSENTModule(path, pooling="mean", max_length=max_length)
    if kind == "simcse":
        return SimCSEModule(path, pooling="mean", mlp="none", max_length=max_length, dropout=0.1)
    if kind == "mlm":
        return MLMModule(path, max_length=max_length, pack=True)
    return ContrastiveTensionModule(path, pooling="mean", max_length=max_length, pairs=batch_size, positives=2)


def timed_phases(device: torch.device, forward, backward, optimizer, clock_split: dict | None = None) -> dict:
    """Run the three phases, each to its last kernel; tokenization inside ``forward`` is split out by the clock."""
    synchronize(device)
    t0 = time.perf_counter()
    tok0 = forward()
    synchronize(device)
    t1 = time.perf_counter()
    backward()
    synchronize(device)
    t2 = time.perf_counter()
    optimizer()
    synchronize(device)
    t3 = time.perf_counter()
    tok = clock_split["tokenize"] if clock_split is not None else tok0
    return {"tokenize": tok, "forward+loss": t1 - t0 - tok, "backward": t2 - t1, "optimizer": t3 - t2, "total": t3 - t0}


class Ours:
    def __init__(self, kind: str, path: str, max_length: int, batch_size: int, autocast: bool = False,
                 dense_embedding_grads: bool = False, device: torch.device = CPU):
        self.clock = Clock()
        self.autocast, self.device = autocast, device
        self.module = our_module(kind, path, max_length, batch_size)
        self.module.log = lambda *args, **kwargs: None  # no trainer: logging is a no-op
        self.module.to(device)  # before the optimizer takes the parameters, as Lightning does
        for encoder in (self.module.encoder, getattr(self.module, "encoder2", None)):
            if encoder is not None:  # instance attribute: times tokenization, code unchanged
                encoder.tokenize = self.clock.wrap(encoder.tokenize)
        if kind == "mlm":  # MLM tokenizes and packs its rows itself
            self.module.rows = self.clock.wrap(self.module.rows)
        if kind == "ct" and not dense_embedding_grads:  # what train.py model=ct runs on one process
            self.opt = self.module.configure_optimizers()["optimizer"]
        else:
            self.opt = make_optimizer(kind, self.module)
        self.module.train()
        # the training loader's collate tokenizes (EncoderModule.batch_tokenizer): timed as tokenize, as with
        # data.num_workers=0 (the default); with workers it runs beside the step, off its critical path
        tokenizer = getattr(self.module, "batch_tokenizer", lambda: None)()
        self.collate = self.clock.wrap(tokenizer) if tokenizer is not None else None

    def step(self, batch: dict, i: int) -> dict[str, float]:
        self.clock.split.clear()
        out = {}

        def forward():
            data = self.collate(batch) if self.collate is not None else batch  # a loader's collate (workers: 0)
            data = {k: v.to(self.device) if torch.is_tensor(v) else v for k, v in data.items()}  # as Lightning does
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
                out["loss"] = self.module.training_step(data, i)

        def optimizer():
            self.opt.step()
            self.opt.zero_grad()

        return timed_phases(self.device, forward, lambda: out["loss"].backward(), optimizer, self.clock.split)


class Theirs:
    def __init__(self, kind: str, path: str, max_length: int, batch_size: int, autocast: bool = False,
                 device: torch.device = CPU):
        from sentence_transformers.util import batch_to_device

        self.kind, self.batch_size, self.autocast, self.device = kind, batch_size, autocast, device
        self.to_device = batch_to_device
        self.max_length = max_length
        self.loss = self.mlm_model(path) if kind == "mlm" else self.st_loss(kind, path, max_length)
        self.loss.to(device)
        self.loss.eval() if kind == "ct" else self.loss.train()  # dropout off for CT, as the paper and our module
        self.opt = make_optimizer(kind, self.loss)

    def st_loss(self, kind: str, path: str, max_length: int) -> torch.nn.Module:
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer import losses

        self.st = SentenceTransformer(path, device=str(self.device))
        self.st.max_seq_length = max_length
        if kind == "nli":
            dim = getattr(self.st, "get_embedding_dimension", self.st.get_sentence_embedding_dimension)()
            return losses.SoftmaxLoss(self.st, dim, num_labels=3)
        if kind in ("mnrl", "simcse"):
            if kind == "simcse":
                set_dropout(self.st[0].auto_model, 0.1)  # the same p as ours, whatever the checkpoint's config says
            return losses.MultipleNegativesRankingLoss(self.st, scale=20.0)
        if kind == "cosent":
            return losses.CoSENTLoss(self.st, scale=20.0)
        return losses.ContrastiveTensionLoss(self.st)  # deep-copies the model: model1 and model2

    def mlm_model(self, path: str) -> torch.nn.Module:
        from transformers import AutoModelForMaskedLM, AutoTokenizer, DataCollatorForLanguageModeling

        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.collator = DataCollatorForLanguageModeling(self.tokenizer, mlm_probability=0.15)
        return AutoModelForMaskedLM.from_pretrained(path)

    def features(self, batch: dict) -> tuple[list, torch.Tensor]:
        """(tokenized columns on the device, labels) of one batch, as the sentence-transformers trainer builds them."""
        if self.kind == "mlm":
            ids = self.tokenizer(list(batch["sentences"]), truncation=True, max_length=self.max_length)["input_ids"]
            return [self.to_device(self.collator([{"input_ids": x} for x in ids]), self.device)], torch.zeros(0)
        if self.kind == "nli":
            columns, labels = (batch["sentences1"], batch["sentences2"]), batch["labels"]
        elif self.kind == "cosent":
            columns, labels = (batch["sentences1"], batch["sentences2"]), batch["scores"]
        elif self.kind == "mnrl":
            columns, labels = (batch["anchors"], batch["positives"], batch["negatives"]), torch.zeros(0)
        elif self.kind == "simcse":  # sentence-transformers' unsupervised SimCSE: the same column twice
            columns, labels = (batch["sentences"], batch["sentences"]), torch.zeros(0)
        else:  # the pairs our module draws at global_step 0 (no trainer) from the same pool
            texts1, texts2, labels = ct_pairs(batch, self.batch_size)
            columns, labels = (texts1, texts2), labels.float()
        return [self.to_device(self.st.tokenize(list(c)), self.device) for c in columns], labels.to(self.device)

    def step(self, batch: dict, i: int) -> dict[str, float]:
        out = {}

        def forward():
            t0 = time.perf_counter()
            features, labels = self.features(batch)
            synchronize(self.device)
            tok = time.perf_counter() - t0
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
                out["loss"] = self.loss(**features[0]).loss if self.kind == "mlm" else self.loss(features, labels)
            return tok

        def optimizer():
            self.opt.step()
            self.opt.zero_grad()

        return timed_phases(self.device, forward, lambda: out["loss"].backward(), optimizer)
