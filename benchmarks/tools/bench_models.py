"""The models and engine options a speed benchmark runs: a named size built from a seed, or any model path.

Why sizes built from seeds: a GPU machine cannot fetch weights and the packaged models do not travel, but speed
depends only on the architecture, so a seeded random BERT of a real model's shape (``--size bert-base``: 12 layers,
hidden 768, 12 heads; ``minilm-l6``: 6 x 384, 12 heads) gives that model's FLOPs and throughput on any machine
(``embeddings/encoders/random_bert.make_random_bert``, over the bert-base-uncased vocabulary). ``tiny`` (2 x 64) is
for rehearsals and tests. Why ``--ours-kwargs``: the encode engine grows options (token budgets, a packed forward);
the benchmarks pass them through by name rather than learning each one.
"""

from __future__ import annotations

import ast
import os
import shutil
import tempfile
from pathlib import Path

from sts_lightning.embeddings.encoders.packaged import bert_uncased_tokenizer_dir, resolve_model_path
from sts_lightning.embeddings.encoders.random_bert import make_random_bert
from sts_lightning.embeddings.errors import ConfigError

SIZES = {"bert-base": (12, 768, 12), "minilm-l6": (6, 384, 12), "tiny": (2, 64, 2)}  # layers, hidden, heads


def sized_model(size: str, root: str | Path | None = None, tokenizer_dir: str | Path | None = None) -> Path:
    """The directory of the seeded random BERT of ``size`` under ``root`` (built once, then reused)."""
    if size not in SIZES:
        raise ConfigError(f"--size {size!r} is not one of {', '.join(SIZES)}")
    layers, hidden, heads = SIZES[size]
    root = Path(root or os.environ.get("STS_BENCH_MODELS") or Path(tempfile.gettempdir()) / "sts_bench_models")
    out = root / f"random-{size}-seed0"
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return out
    tmp = root / f".{out.name}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    make_random_bert(tmp, tokenizer_dir or bert_uncased_tokenizer_dir(), layers=layers, hidden=hidden, heads=heads,
                     seed=0)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)  # whole or absent: a cut run leaves no half-written model to be reused
    return out


def add_model_args(parser) -> None:
    parser.add_argument("--size", default=None, choices=sorted(SIZES),
                        help="a seeded random BERT of this shape instead of --model (bert-base 12x768, minilm-l6 6x384)")
    parser.add_argument("--tokenizer", default=None,
                        help="--size: the tokenizer directory (default: the packaged bert-base-uncased word pieces)")
    parser.add_argument("--json", default=None, help="append one JSON line of figures per result to this file")


def model_from_args(args) -> tuple[str, str]:
    """(path, label) of the model a benchmark runs: ``--size`` when given, else ``--model``."""
    if args.size:
        layers, hidden, heads = SIZES[args.size]
        return str(sized_model(args.size, tokenizer_dir=args.tokenizer)), f"random {args.size} ({layers}x{hidden}, {heads} heads)"
    return resolve_model_path(args.model), args.model


def parse_kwargs(text: str | None) -> dict:
    """``"max_tokens=8192,packing=packed"`` -> ``{"max_tokens": 8192, "packing": "packed"}`` (Python literals or strings)."""
    out: dict = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"expected key=value, got {item!r} (e.g. --ours-kwargs max_tokens=8192,packing=packed)")
        value = value.strip()
        lowered = {"true": True, "false": False, "none": None, "null": None}
        if value.lower() in lowered:
            out[key.strip()] = lowered[value.lower()]
            continue
        try:
            out[key.strip()] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key.strip()] = value
    return out
