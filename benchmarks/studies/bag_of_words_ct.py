"""Can CT's halves objective learn STS from scratch without a transformer? A bag-of-wordpieces control.

Why: CT from scratch on a random BERT (``experiment=ct/scratch``) gains little. Here each copy is a mean of trainable
wordpiece vectors (two copies, BERT's init) trained with the loss of ``model.objective=in_batch
model.views=mixed_halves`` and Adam. Variant ``positions`` adds [CLS] / [SEP] and a vector per position, so the bag can
see a half's length: if it learns faster and scores worse, the length shortcut, not the objective, holds CT back.

    python -m benchmarks.studies.bag_of_words_ct --data-dir ../shared/data [--epochs 1] [--variants words positions]

Scores are STS-B dev Spearman x100 of the better copy (mean of its vectors, cosine); step 0 is the untrained bag.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from sts_lightning.datamodules.sentence_files import read_sentences
from sts_lightning.embeddings.methods.ct.objective import in_batch_tension_loss, split_views
from sts_lightning.sts.scoring import correlations
from sts_lightning.sts.tasks import load_task, resolve_data_dir

VARIANTS = ("words", "positions")
MAX_POSITIONS = 128


class WordpieceBag(torch.nn.Module):
    """Mean of trainable vectors of a text's wordpieces (and, with ``positions``, [CLS], [SEP], position ids)."""

    def __init__(self, tokenizer, dim: int, positions: bool, generator: torch.Generator) -> None:
        super().__init__()
        self.tokenizer, self.positions, self.vocab = tokenizer, positions, tokenizer.vocab_size
        self.table = torch.nn.EmbeddingBag(self.vocab + MAX_POSITIONS, dim, mode="mean")
        with torch.no_grad():
            self.table.weight.normal_(0.0, 0.02, generator=generator)

    def ids(self, text: str) -> list[int]:
        return self.batch_ids([text])[0]

    def batch_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's bag (one tokenizer call for the whole batch: this runs every training step)."""
        encoded = self.tokenizer(list(texts), add_special_tokens=False, truncation=True,
                                 max_length=MAX_POSITIONS - 2)["input_ids"]
        return [self._bag(ids) for ids in encoded]

    def _bag(self, ids: list[int]) -> list[int]:
        if self.positions:
            ids = [self.tokenizer.cls_token_id, *ids, self.tokenizer.sep_token_id]
            ids += [self.vocab + i for i in range(len(ids))]
        return ids or [self.tokenizer.unk_token_id]

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        bags = self.batch_ids(texts)
        flat = torch.tensor([i for b in bags for i in b])
        offsets = torch.tensor(np.cumsum([0] + [len(b) for b in bags[:-1]]))
        return self.table(flat, offsets)


def stsb_dev_spearman(bag: WordpieceBag, pairs) -> float:
    with torch.no_grad():
        return correlations(F.cosine_similarity(bag(pairs.sentences1), bag(pairs.sentences2)).numpy(),
                            pairs.scores)["spearman"]


def train_variant(variant: str, sentences: list[str], pairs, tokenizer, args
                  ) -> tuple[list[tuple[int, float, float]], WordpieceBag]:
    """``[(step, mean loss since the last row, STS-B dev of the better copy)]`` (step 0 first) and copy 1."""
    generator = torch.Generator().manual_seed(args.seed)
    bag1 = WordpieceBag(tokenizer, args.dim, variant == "positions", generator)
    bag2 = WordpieceBag(tokenizer, args.dim, variant == "positions", generator)
    bag2.load_state_dict(bag1.state_dict())  # CT: two independent copies of one initial model
    optimizer = torch.optim.Adam([*bag1.parameters(), *bag2.parameters()], lr=args.lr)
    rng = np.random.default_rng(args.seed)
    steps_per_epoch = len(sentences) // args.batch_size
    total = int(args.epochs * steps_per_epoch)
    marks = {max(1, round(total * k / args.points)) for k in range(1, args.points + 1)}
    rows, losses, start = [(0, float("nan"), stsb_dev_spearman(bag1, pairs))], [], time.time()
    order = rng.permutation(len(sentences))
    for step in range(total):
        if step and step % steps_per_epoch == 0:
            order = rng.permutation(len(sentences))
        at = (step % steps_per_epoch) * args.batch_size
        batch = [sentences[i] for i in order[at:at + args.batch_size]]
        left, right = split_views(batch, batch, rng, mixed=True)
        loss = in_batch_tension_loss(bag1(left), bag2(right), scale=args.scale)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step + 1 in marks:
            score = max(stsb_dev_spearman(bag1, pairs), stsb_dev_spearman(bag2, pairs))
            rows.append((step + 1, float(np.mean(losses)), score))
            losses = []
            print(f"{variant}: step {step + 1}/{total} loss {rows[-1][1]:.3f} STS-B dev {score:.2f} "
                  f"({time.time() - start:.0f}s)", flush=True)
    return rows, bag1


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="data directory (default: $STS_DATA_DIR)")
    parser.add_argument("--corpus", default="wiki/wiki_sentences_100k.txt", help="sentence file under the data dir")
    parser.add_argument("--tokenizer", default="outputs/random_bert", help="tokenizer directory (the random BERT's)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--scale", type=float, default=20.0)
    parser.add_argument("--points", type=int, default=8, help="evaluations per variant")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    data_dir = resolve_data_dir(args.data_dir)
    if not (data_dir / args.corpus).is_file():
        parser.error(f"corpus {data_dir / args.corpus} not found (one sentence a line, e.g. wiki/wiki_sentences_100k.txt)")
    sentences = read_sentences([args.corpus], str(data_dir), min_words=2)
    pairs = next(iter(load_task("stsb-dev", data_dir).subsets.values()))
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    results = {v: train_variant(v, sentences, pairs, tokenizer, args)[0] for v in args.variants}
    print(f"\n{len(sentences)} sentences, batch {args.batch_size}, Adam {args.lr:g}, {args.epochs:g} epoch(s)")
    print("| variant | step | mean train loss | STS-B dev |\n|---|---|---|---|")
    for variant, rows in results.items():
        for step, loss, score in rows:
            print(f"| {variant} | {step} | {'' if np.isnan(loss) else f'{loss:.3f}'} | {score:.2f} |")


if __name__ == "__main__":
    main()
