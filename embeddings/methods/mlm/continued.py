"""A masked LM continued from an encoder for a fixed, small number of steps, without Lightning: a model build step.

The packaged ``paraphrase-MiniLM-L3-v2-mlm`` (DiffCSE's offline generator) is built on first use from inside
``resolve_model_path``, which cannot start a Lightning run; the objective and optimizer are ``model=mlm``'s own. The
result is a pure function of (base weights, corpus, recipe); the global random state is left as it was.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from sts_lightning.embeddings.console import clock, progress
from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.input_file import require_file
from sts_lightning.embeddings.isolated_rng import isolated_rng
from sts_lightning.embeddings.methods.mlm.masked_lm import load_masked_lm, mlm_head
from sts_lightning.embeddings.methods.mlm.objective import (
    HELDOUT_STREAM,
    TRAIN_STREAM,
    build_rows,
    mask_generator,
    mask_rows,
    masked_lm_loss,
    masker,
)
from sts_lightning.embeddings.methods.shared.batch_tokens import TextTokenizer

log = logging.getLogger(__name__)
BUILD_INFO = "mlm_build.json"  # what was trained and measured, beside the weights


@dataclass(frozen=True)
class Recipe:
    """How the masked LM is continued; defaults: ``experiment=pipeline/mlm_diffcse``'s stage 1."""

    steps: int = 1000
    batch_size: int = 64
    lr: float = 2e-4
    head_only: bool = False  # train the MLM head alone (the encoder frozen, its forward without gradients)
    max_length: int = 32
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    clip_norm: float = 1.0
    mlm_probability: float = 0.15
    heldout: int = 1000  # the corpus's last usable lines: scored, never trained on
    seed: int = 0


def read_corpus(path: Path, heldout: int) -> tuple[list[str], list[str]]:
    """(training sentences, held-out sentences): the non-empty lines, the last ``heldout`` of them held out."""
    lines = [s for s in (line.strip() for line in require_file(path, "corpus file").open(encoding="utf-8")) if s]
    if len(lines) <= heldout:
        raise DataError(f"{path}: {len(lines)} non-empty lines, need more than the {heldout} held out")
    return lines[:-heldout] if heldout else lines, lines[-heldout:] if heldout else []


def continue_masked_lm(base: str, corpus: Path, out: Path, recipe: Recipe = Recipe(), what: str = "masked LM") -> dict:
    """Continue ``base`` on ``corpus`` with ``recipe`` and save it (and ``mlm_build.json``) to ``out``; returns the facts."""
    import numpy as np
    import torch

    train, heldout = read_corpus(Path(corpus), recipe.heldout)
    started = time.monotonic()
    with isolated_rng(recipe.seed):
        model, tokenizer = load_masked_lm(base)
        head = mlm_head(model)
        if recipe.head_only:
            model.requires_grad_(False)
            head.requires_grad_(True)
            model.get_output_embeddings().weight.requires_grad_(False)  # the decoder IS the (frozen) word embeddings
        order = np.random.default_rng(recipe.seed).permutation(len(train))
        optimizer, schedule = _optimizer(model, recipe)
        tokenize = TextTokenizer(tokenizer, recipe.max_length)
        collator = masker(tokenizer, recipe.mlm_probability)

        def loss_of(sentences: Sequence[str], generator: torch.Generator):
            rows = build_rows(tokenize(sentences), tokenizer.all_special_ids, tokenizer.pad_token_id or 0,
                              recipe.max_length)
            input_ids, labels = mask_rows(collator, rows, generator)
            with torch.set_grad_enabled(torch.is_grad_enabled() and not recipe.head_only):
                hidden = model.base_model(input_ids=input_ids, attention_mask=rows.attention_mask).last_hidden_state
            return masked_lm_loss(hidden, labels, head)

        model.train()
        for step in progress(range(recipe.steps), f"building {what}", unit="step"):
            at = (step * recipe.batch_size + np.arange(recipe.batch_size)) % len(train)
            loss, _, _ = loss_of([train[i] for i in order[at]], mask_generator(recipe.seed, TRAIN_STREAM, step))
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], recipe.clip_norm)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
        model.eval()
        with torch.no_grad():
            scored = [loss_of(heldout[start:start + recipe.batch_size], mask_generator(recipe.seed, HELDOUT_STREAM, b))
                      for b, start in enumerate(range(0, len(heldout), recipe.batch_size))]
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    masked = sum(len(t) for _, _, t in scored)
    facts = {"base": Path(base).name if Path(base).is_dir() else base, "corpus": Path(corpus).name,
             "corpus_sha256": _sha256(Path(corpus)),
             "recipe": asdict(recipe), "seconds": round(time.monotonic() - started, 1),
             "heldout_sentences": len(heldout),
             "heldout_mlm_loss": sum(float(loss) * len(t) for loss, _, t in scored) / max(masked, 1),
             "heldout_mlm_accuracy": sum(int((p == t).sum()) for _, p, t in scored) / max(masked, 1)}
    (out / BUILD_INFO).write_text(json.dumps(facts, indent=1))
    log.info("built %s in %s: held-out MLM accuracy %.1f%% (loss %.2f) on %d sentences of %s", what,
             clock(facts["seconds"]), 100 * facts["heldout_mlm_accuracy"], facts["heldout_mlm_loss"], len(heldout),
             facts["corpus"])
    return facts


def _optimizer(model, recipe: Recipe):
    """``model=mlm``'s AdamW (decay on matrices only) and linear warm-up / decay schedule (``EncoderModule``)."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": recipe.weight_decay},
              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=recipe.lr)
    warmup = int(-(-recipe.warmup_ratio * recipe.steps // 1))
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup, recipe.steps)


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
