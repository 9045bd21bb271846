"""Does SBERT-WK beat mean pooling on an NLI-trained backbone, the setting of the paper's gain?

Our packaged models are already tuned for cosine similarity, where SBERT-WK loses to mean pooling.
The paper's gain was on BERT fine-tuned with the SBERT NLI softmax objective. No such checkpoint
installs offline, so this script makes one with sentence-transformers' own trainer (an independent
implementation): ``SoftmaxLoss`` over (u, v, |u-v|), batch 16, AdamW lr 2e-5, 10% warmup, on the
local SNLI dev+test pairs, then compares mean pooling and SBERT-WK (code and paper variants) on it.

    python -m benchmarks.studies.sbert_wk_nli_check --model all-MiniLM-L6-v2 --steps 600
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402

from sts_lightning.embeddings.encoders.load import load_encoder  # noqa: E402
from sts_lightning.embeddings.encoders.packaged import resolve_model_path  # noqa: E402
from sts_lightning.embeddings.scoring.registry import build_scorer  # noqa: E402
from sts_lightning.embeddings.scoring.shared_pass import share_forward_pass  # noqa: E402
from sts_lightning.sts.scoring import score_tasks  # noqa: E402
from sts_lightning.sts.tasks import load_task, resolve_data_dir  # noqa: E402

LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}
SCORERS = ["mean", "sbert_wk", {"name": "sbert_wk", "label": "sbert_wk_paper", "variant": "paper"}]


def read_snli(root: Path) -> dict[str, list]:
    """SentEval-layout SNLI (s1.*, s2.*, labels.*) for the dev and test splits we have."""
    out: dict[str, list] = {"premise": [], "hypothesis": [], "label": []}
    for split in ("dev", "test"):
        folder = root / "nli" / "snli"
        s1 = (folder / f"s1.{split}").read_text(encoding="utf-8").splitlines()
        s2 = (folder / f"s2.{split}").read_text(encoding="utf-8").splitlines()
        labels = (folder / f"labels.{split}").read_text(encoding="utf-8").splitlines()
        for a, b, lab in zip(s1, s2, labels, strict=True):
            if a.strip() and b.strip() and lab.strip() in LABELS:
                out["premise"].append(a.strip())
                out["hypothesis"].append(b.strip())
                out["label"].append(LABELS[lab.strip()])
    return out


def nli_finetune(model_path: str, data: dict[str, list], steps: int, out_dir: Path, seed: int) -> None:
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import SoftmaxLoss

    model = SentenceTransformer(model_path, device="cpu")
    loss = SoftmaxLoss(model, model.get_sentence_embedding_dimension(), num_labels=3)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out_dir / "trainer"), max_steps=steps, per_device_train_batch_size=16, learning_rate=2e-5,
        weight_decay=0.01, warmup_steps=0.1, seed=seed, report_to="none", save_strategy="no", logging_steps=50)
    SentenceTransformerTrainer(model=model, args=args, train_dataset=Dataset.from_dict(data), loss=loss).train()
    model.save(str(out_dir / "model"))


def evaluate_scorers(model_dir: str, tasks) -> dict[str, dict[str, float]]:
    encoder = load_encoder(model_dir)
    scorers = [build_scorer(s, encoder, {"sbert_wk": {"layer_start": "auto"}}) for s in SCORERS]
    sentences = [s for t in tasks for p in t.subsets.values() for s in (*p.sentences1, *p.sentences2)]
    scorers = share_forward_pass(encoder, scorers, sentences)
    return {sc.name: {t: v["all"]["spearman"] for t, v in score_tasks(sc, tasks).items()} for sc in scorers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", default="sts12,sts16,stsb-dev,sick-train+sick-trial")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    root = resolve_data_dir(args.data_dir)
    tasks = [load_task(t, root) for t in args.tasks.split(",")]
    data = read_snli(root)
    rows = {"before NLI": evaluate_scorers(resolve_model_path(args.model), tasks)}
    with tempfile.TemporaryDirectory() as tmp:
        nli_finetune(resolve_model_path(args.model), data, args.steps, Path(tmp), args.seed)
        rows[f"after {args.steps} NLI steps"] = evaluate_scorers(str(Path(tmp) / "model"), tasks)
    names = [t.name for t in tasks]
    print(f"\n{args.model}, SoftmaxLoss on {len(data['label'])} local SNLI pairs, Spearman x100 ('all')")
    print("| backbone | scorer | " + " | ".join(names) + " | avg |")
    print("|---|---|" + "---|" * (len(names) + 1))
    for backbone, res in rows.items():
        for scorer, vals in res.items():
            cells = [f"{vals[n]:.2f}" for n in names]
            print(f"| {backbone} | {scorer} | " + " | ".join(cells) + f" | {sum(vals.values()) / len(vals):.2f} |")


if __name__ == "__main__":
    main()
