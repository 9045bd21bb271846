"""A tiny random BERT whose word-level vocabulary holds the paper's template words (``this sentence : " means``),
so templates tokenize into real pieces, as with bert-base-uncased, and not into [UNK]."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.helpers import WORDS

TEMPLATE_WORDS = ["this", "sentence", "of", ":", '"', "'", "means", "?", "!"]


@pytest.fixture(scope="session")
def prompt_model_dir(tmp_path_factory) -> Path:
    """2 layers, hidden 32, dropout 0.1; 64 positions (a template of 10 tokens and sentences up to 50)."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path = tmp_path_factory.mktemp("prompt_bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + WORDS + TEMPLATE_WORDS
    tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=96)
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _their_filled(tokenizer, template: str, sentences) -> list[str]:
    """kongds/Prompt-BERT ``evaluation.py``'s ``batcher`` (690ba6e): each sentence, with a period where it lacks a
    final ``.?"'``, put in their-syntax ``template`` as text (the oracle of the evaluation-side string handling)."""
    template = template.replace("*mask*", tokenizer.mask_token).replace("_", " ").replace("*sep+*", "") \
        .replace("*cls*", "")
    filled = []
    for s in sentences:
        if len(s) > 0 and s[-1] not in ".?\"'":
            s += "."
        filled.append(template.replace("*sent 0*", s).strip())
    return filled


@pytest.fixture(scope="session")
def their_filled():
    """The authors' evaluation strings, as a function ``(tokenizer, template, sentences) -> list[str]``."""
    return _their_filled


@pytest.fixture(scope="session")
def roberta_tokenizer():
    """A tiny byte-level BPE tokenizer built as RoBERTa's (``<s> ... </s>``, ``<mask>`` stripping the space before it),
    trained here on a few lines: BPE pieces depend on the spaces around them, which WordPiece ignores."""
    from tokenizers import AddedToken, ByteLevelBPETokenizer
    from tokenizers.processors import RobertaProcessing
    from transformers import RobertaTokenizerFast

    bpe = ByteLevelBPETokenizer()
    lines = [" ".join(WORDS), "This sentence : ' a man ' means.", 'the cat said "hi" .'] * 5
    bpe.train_from_iterator(lines, vocab_size=400, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe._tokenizer.post_processor = RobertaProcessing(("</s>", bpe.token_to_id("</s>")), ("<s>", bpe.token_to_id("<s>")))
    return RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                cls_token="<s>", unk_token="<unk>", pad_token="<pad>",
                                mask_token=AddedToken("<mask>", lstrip=True, rstrip=False))
