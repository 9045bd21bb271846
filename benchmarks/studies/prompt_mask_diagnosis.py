"""Why a prompt [MASK] vector works or fails on a masked LM: what the LM predicts at the template's [MASK], and how
alike the vectors of unrelated sentences are under each scorer.

Why: PromptBERT's training-free claim rests on the masked LM predicting sentence-specific words at the [MASK] of
``This sentence : "[X]" means[MASK].``. A weak LM predicts the corpus's commonest piece for nearly every sentence, and
the [MASK] state then carries that prior instead of the sentence. Output: per scorer (cls, mean, prompt, prompt +
denoising) the mean cosine of distinct STS-B dev sentences' vectors (1.0 = all the same), and the LM's arg-max
pieces at the [MASK]. Scorers and ids are built as ``evaluate.py`` builds them, so the numbers describe the field
table's rows.

    python -m benchmarks.studies.prompt_mask_diagnosis <masked LM directory> [--sentences 400] [--data-dir ../shared/data]
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import torch

import sts_lightning as sl
from benchmarks.studies.dropout_noise import distinct_first_sentences, mean_pairwise_cosine
from benchmarks.tools.cpu_features import cpu_line
from sts_lightning.embeddings.methods.promptbert.template import DEFAULT, Template, eval_ids
from sts_lightning.sts.tasks import load_task

ROOT = Path(__file__).resolve().parents[2]
SCORERS = {"cls": "cls", "mean": "mean", "prompt": "prompt", "prompt_denoise": {"name": "prompt", "denoise": True}}


def mask_predictions(path: str, sentences: Sequence[str], template: str = DEFAULT, batch_size: int = 64) -> Counter:
    """The masked LM's arg-max piece at the template's [MASK], counted over ``sentences``."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForMaskedLM.from_pretrained(path).eval()
    ids, _ = eval_ids(tokenizer, Template(template), sentences, max_length=None)
    counts: Counter = Counter()
    with torch.no_grad():
        for start in range(0, len(ids), batch_size):
            batch = tokenizer.pad({"input_ids": ids[start:start + batch_size]}, return_tensors="pt")
            logits = model(**batch).logits[batch["input_ids"] == tokenizer.mask_token_id]
            counts.update(tokenizer.convert_ids_to_tokens(logits.argmax(-1).tolist()))
    return counts


def _vectors(encoded) -> torch.Tensor:
    return encoded if torch.is_tensor(encoded) else encoded["embedding"]


def diagnose(path: str, sentences: Sequence[str]) -> dict:
    """``{"cosine": {scorer: mean pairwise cosine}, "mask": {"top": [(piece, count)], "distinct", "top_share"}}``."""
    cosine = {name: mean_pairwise_cosine(_vectors(sl.load(path, scorer=scorer).encode(list(sentences))))
              for name, scorer in SCORERS.items()}
    counts = mask_predictions(path, sentences)
    top = counts.most_common(8)
    return {"cosine": cosine, "mask": {"top": top, "distinct": len(counts), "top_share": top[0][1] / len(sentences)}}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a masked-LM directory (a model=mlm export) or hub name")
    parser.add_argument("--sentences", type=int, default=400)
    parser.add_argument("--data-dir", default=os.environ.get("STS_DATA_DIR", str(ROOT.parent / "shared" / "data")))
    args = parser.parse_args(argv)
    sentences = distinct_first_sentences(load_task("stsb-dev", args.data_dir), args.sentences)
    print(f"{args.model}: {len(sentences)} STS-B dev sentences; {cpu_line()}", flush=True)
    result = diagnose(args.model, sentences)
    for name, value in result["cosine"].items():
        print(f"  {name:15s} mean pairwise cosine {value:.3f}")
    mask = result["mask"]
    print(f"  arg-max at [MASK]: {mask['top']}; {mask['distinct']} distinct; top share {mask['top_share']:.2f}")
    return result


if __name__ == "__main__":
    main()
