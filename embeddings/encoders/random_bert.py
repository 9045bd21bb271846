"""A seeded, randomly initialised BERT with the bert-base-uncased vocabulary: ``bert-random-4x256``, what ``make
run`` trains from scratch (learning visible in minutes on a CPU); its weights are a function of seed and config."""

from __future__ import annotations

import shutil
from pathlib import Path

from sts_lightning.embeddings.io.st_export import write_sentence_bert_config
from sts_lightning.embeddings.isolated_rng import isolated_rng

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def bert_config(tokenizer_dir: str | Path, layers: int = 4, hidden: int = 256, heads: int = 4,
                intermediate: int | None = None, max_positions: int = 512):
    """The ``BertConfig`` of a BERT of this size over ``tokenizer_dir``'s vocabulary (packaged and from scratch)."""
    from transformers import BertConfig

    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    vocab_size = sum(1 for _ in (Path(tokenizer_dir) / "vocab.txt").open(encoding="utf-8"))
    return BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, intermediate_size=intermediate or 4 * hidden,
                      max_position_embeddings=max_positions, type_vocab_size=2)


def make_random_bert(out: str | Path, tokenizer_dir: str | Path, layers: int = 4, hidden: int = 256,
                     heads: int = 4, intermediate: int | None = None, max_positions: int = 512, seed: int = 0,
                     max_seq_length: int | None = None) -> Path:
    """Save a seeded random ``BertModel`` (safetensors) and the tokenizer files of ``tokenizer_dir`` into ``out``."""
    from transformers import BertModel

    config = bert_config(tokenizer_dir, layers, hidden, heads, intermediate, max_positions)
    with isolated_rng(seed):  # the weights are a function of ``seed`` alone, and the caller's run is left as it was
        model = BertModel(config)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (src := Path(tokenizer_dir) / name).is_file():
            shutil.copyfile(src, out / name)
    if max_seq_length:
        write_sentence_bert_config(out, max_seq_length)
    return out
