"""PromptBERT's templates (Jiang et al. 2022): the text around a sentence whose [MASK] state is the sentence vector.

A template is plain text with one ``[X]`` (the sentence) and one ``[MASK]``; the authors' spacing is kept (it matters
for RoBERTa's BPE). Both ways kongds/Prompt-BERT at 690ba6e makes token ids are kept: evaluation tokenizes the
filled string whole (``eval_ids``), training the template halves and the sentence apart (``train_ids``).
Torch-free: config checks read templates before torch is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sts_lightning.embeddings.errors import ConfigError

SENTENCE, MASK = "[X]", "[MASK]"
PERIOD_ENDINGS = ".?\"'"  # evaluation.py: `if s[-1] not in '.?"\'': s += '.'`
# The paper's templates (Table 5 / run.sh): the training-free default, and the unsupervised BERT recipe's pair.
DEFAULT = 'This sentence : "[X]" means[MASK].'
UNSUP_BERT = ('This sentence of "[X]" means[MASK].', 'This sentence : "[X]" means[MASK].')


@dataclass(frozen=True)
class Template:
    """A checked template: one ``[X]`` and one ``[MASK]``, else a ``ConfigError`` naming the config ``key``."""

    text: str
    key: str = "template"

    def __post_init__(self) -> None:
        problem = template_problem(self.text)
        if problem:
            raise ConfigError(f"{self.key}={self.text!r}: {problem}")

    @property
    def prefix(self) -> str:
        return self.text.split(SENTENCE)[0]

    @property
    def suffix(self) -> str:
        return self.text.split(SENTENCE)[1]

    @property
    def mask_after_sentence(self) -> bool:
        return MASK in self.suffix

    def filled(self, sentence: str, mask_token: str) -> str:
        """evaluation.py's string: ``[MASK]`` -> the mask token, then the sentence in, then ``strip``."""
        return (self.prefix + sentence + self.suffix).replace(MASK, mask_token).strip()


def template_problem(text: object) -> str | None:
    """Why ``text`` is no usable template, or ``None``."""
    if not isinstance(text, str):
        return f"a template is a string with one {SENTENCE} and one {MASK}, not {type(text).__name__}"
    if not text.strip():
        return f"the template is empty: write the text around the sentence, e.g. {DEFAULT!r}"
    for marker, what in ((SENTENCE, "where the sentence goes"), (MASK, "whose state is the sentence vector")):
        count = text.count(marker)
        if count != 1:
            return f"needs exactly one {marker} ({what}), found {count} (e.g. {DEFAULT!r})"
    return None


def with_period(sentence: str) -> str:
    """evaluation.py's rule: a sentence not ending in ``.?"'`` gets a final period."""
    return sentence if not sentence or sentence[-1] in PERIOD_ENDINGS else sentence + "."


def _encode(tokenizer, text: str, special: bool = True) -> list[int]:
    return list(tokenizer(text, add_special_tokens=special, return_attention_mask=False,
                          return_token_type_ids=False)["input_ids"])


def train_parts(tokenizer, template: Template) -> tuple[list[int], list[int]]:
    """``(bs, es)`` of train.py: [CLS] + stripped prefix, and suffix (leading space kept) + [SEP]."""
    bs = _encode(tokenizer, template.prefix.replace(MASK, tokenizer.mask_token).strip())[:-1]
    es = _encode(tokenizer, template.suffix.replace(MASK, tokenizer.mask_token))[1:]
    return bs, es


def train_ids(tokenizer, template: Template, sentences: Sequence[str], max_length: int | None) -> list[list[int]]:
    """train.py's ids: ``bs + encode(s, no special tokens)[:max_length] + es`` per sentence (no period added)."""
    bs, es = train_parts(tokenizer, template)
    out = tokenizer(list(sentences), add_special_tokens=False, return_attention_mask=False,
                    return_token_type_ids=False)["input_ids"]
    return [bs + list(ids)[:max_length] + es for ids in out]


def template_only(tokenizer, template: Template) -> list[int]:
    """The ids of the template with no sentence, as get_delta makes them: the sentence slot is one space, and a
    run of three spaces (a template with spaces around ``[X]``) collapses to one."""
    text = (template.prefix + " " + template.suffix).replace(MASK, tokenizer.mask_token).strip().replace("   ", " ")
    return _encode(tokenizer, text)


def prefix_length(tokenizer, template: Template) -> int:
    """Tokens before the sentence slot, [CLS] included: from here on a sentence of ``n`` tokens shifts positions by
    ``n`` (evaluation.py's ``bs_length = len(encode(prefix.strip())) - 2 + 1``)."""
    return len(_encode(tokenizer, template.prefix.replace(MASK, tokenizer.mask_token).strip())) - 1


def eval_ids(tokenizer, template: Template, sentences: Sequence[str], max_length: int | None,
             add_period: bool = True) -> tuple[list[list[int]], list[int]]:
    """evaluation.py's ids (the filled string tokenized whole) and each sentence's token count; a sentence over
    ``max_length`` tokens (template not counted) is cut and assembled as in training."""
    texts = [template.filled(with_period(s) if add_period else s, tokenizer.mask_token) for s in sentences]
    whole = tokenizer(texts, add_special_tokens=True, return_attention_mask=False,
                      return_token_type_ids=False)["input_ids"]
    base = len(template_only(tokenizer, template))
    ids, lengths = [list(x) for x in whole], [len(x) - base for x in whole]
    long = [i for i, n in enumerate(lengths) if max_length is not None and n > max_length]
    if long:
        cut = train_ids(tokenizer, template, [with_period(sentences[i]) if add_period else sentences[i]
                                              for i in long], max_length)
        for i, row in zip(long, cut, strict=True):
            ids[i], lengths[i] = row, len(row) - base
    return ids, lengths


def mask_slot(tokenizer, template: Template) -> int:
    """Where the template's [MASK] sits in every row (``k < 0``: index ``length + k``); a constant because the mask
    token is special, so the text beyond it is tokenized apart from the sentence."""
    ids = template_only(tokenizer, template)
    where = [i for i, t in enumerate(ids) if t == tokenizer.mask_token_id]
    if len(where) != 1:
        raise ConfigError(f"{template.key}={template.text!r}: the tokenized template holds {len(where)} mask tokens "
                          f"({tokenizer.mask_token!r}), not one")
    return where[0] - len(ids) if template.mask_after_sentence else where[0]
