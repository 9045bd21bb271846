"""BERT's masking as transformers' collator does it (statistics, special tokens, parity), its seeding, packing, loss."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, DataCollatorForLanguageModeling

from sts_lightning.embeddings.encoders.packaged import bert_uncased_tokenizer_dir
from sts_lightning.embeddings.methods.mlm.objective import (
    IGNORE,
    build_rows,
    mask_generator,
    mask_rows,
    masked_lm_loss,
    masker,
    pack_rows,
)

SENTENCES = ["The quick brown fox jumps over the lazy dog.", "Unbelievably, the anthropologists disagreed.",
             "A man is playing a guitar.", "Tokenization splits rare words into pieces.", "Short one."] * 8


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(bert_uncased_tokenizer_dir()))


def _rows(tokenizer, sentences=SENTENCES, pack=True, max_length=32, offsets=False):
    enc = tokenizer(sentences, truncation=True, max_length=max_length, return_offsets_mapping=offsets)
    return build_rows(enc["input_ids"], tokenizer.all_special_ids, tokenizer.pad_token_id, max_length, pack,
                      enc["offset_mapping"] if offsets else None)


def test_masking_statistics_are_berts_15_percent_with_80_10_10(tokenizer):
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 29000, (400, 128), generator=gen)
    ids[:, 0], ids[:, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id
    rows = build_rows(ids.tolist(), tokenizer.all_special_ids, tokenizer.pad_token_id, 128, pack=False)
    inputs, labels = mask_rows(masker(tokenizer), rows, mask_generator(0, 0, 0, 0))
    chosen = labels != IGNORE
    assert chosen.float().sum() / (~rows.special).sum() == pytest.approx(0.15, abs=0.005)
    as_mask = (inputs == tokenizer.mask_token_id) & chosen
    kept = (inputs == ids) & chosen
    random = chosen & ~as_mask & ~kept
    n = chosen.sum().float()
    assert as_mask.sum() / n == pytest.approx(0.8, abs=0.01)
    assert kept.sum() / n == pytest.approx(0.1, abs=0.01)  # a random draw of the same piece counts as kept
    assert random.sum() / n == pytest.approx(0.1, abs=0.01)
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(inputs[~chosen], ids[~chosen])


def test_special_tokens_and_padding_are_never_masked(tokenizer):
    rows = _rows(tokenizer, pack=False)
    assert rows.padding_share > 0
    for seed in range(20):
        inputs, labels = mask_rows(masker(tokenizer, mlm_probability=0.9), rows, mask_generator(seed, 0, 0, 0))
        assert (labels[rows.special] == IGNORE).all()
        assert torch.equal(inputs[rows.special], rows.input_ids[rows.special])


def test_masks_equal_the_collators_own_call_with_the_same_seed(tokenizer):
    """``DataCollatorForLanguageModeling(seed=s)(examples)`` pads and masks; ours draws from the same generator."""
    enc = tokenizer(SENTENCES, truncation=True, max_length=32, return_special_tokens_mask=True)
    examples = [{"input_ids": i, "special_tokens_mask": s}
                for i, s in zip(enc["input_ids"], enc["special_tokens_mask"], strict=True)]
    reference = DataCollatorForLanguageModeling(tokenizer, seed=1234)(examples)
    rows = _rows(tokenizer, pack=False)
    inputs, labels = mask_rows(masker(tokenizer), rows, torch.Generator().manual_seed(1234))
    assert torch.equal(inputs, reference["input_ids"]) and torch.equal(labels, reference["labels"])


def test_whole_word_masking_masks_every_piece_of_a_chosen_word_with_mask(tokenizer):
    rows = _rows(tokenizer, offsets=True)
    inputs, labels = mask_rows(masker(tokenizer, 0.3, whole_word_mask=True), rows, mask_generator(3, 0, 0, 0))
    chosen = labels != IGNORE
    assert chosen.any() and (inputs[chosen] == tokenizer.mask_token_id).all()
    pieces = [tokenizer.convert_ids_to_tokens(int(t)) for t in rows.input_ids[0]]
    for j, piece in enumerate(pieces):  # a ## piece is chosen exactly when the piece before it is
        if piece.startswith("##"):
            assert chosen[0, j] == chosen[0, j - 1], pieces


def test_masks_are_a_pure_function_of_seed_step_and_rank(tokenizer):
    rows = _rows(tokenizer)
    collator = masker(tokenizer)

    def draw(*key):
        return mask_rows(collator, rows, mask_generator(*key))[1]

    assert torch.equal(draw(7, 0, 5, 0), draw(7, 0, 5, 0))
    others = [draw(7, 0, 6, 0), draw(7, 0, 5, 1), draw(8, 0, 5, 0), draw(7, 1, 5)]
    assert not any(torch.equal(draw(7, 0, 5, 0), other) for other in others)


def test_packing_fills_rows_keeps_sentences_whole_and_cuts_padding(tokenizer):
    enc = tokenizer(SENTENCES, truncation=True, max_length=32)["input_ids"]
    rows, _ = pack_rows(enc, 32)
    assert all(len(r) <= 32 for r in rows) and all(r[0] == tokenizer.cls_token_id for r in rows)
    bodies = [s[1:] for s in enc]
    assert [t for r in rows for t in r[1:]] == [t for b in bodies for t in b]  # order kept, nothing lost
    assert sum(r.count(tokenizer.sep_token_id) for r in rows) == len(SENTENCES)
    assert sum(r.count(tokenizer.cls_token_id) for r in rows) == len(rows)
    packed, padded = _rows(tokenizer), _rows(tokenizer, pack=False)
    assert packed.tokens == padded.tokens - (len(SENTENCES) - len(rows))  # one [CLS] a row, not a sentence
    assert packed.padding_share < padded.padding_share and len(rows) < len(SENTENCES) / 2


def test_a_sentence_longer_than_a_row_is_truncated_not_split(tokenizer):
    enc = tokenizer(["word " * 100, "short"], truncation=True, max_length=16)["input_ids"]
    rows, _ = pack_rows(enc, 16)
    assert [len(r) for r in rows] == [16, 3]


def test_loss_equals_bert_for_masked_lm_and_is_zero_with_nothing_masked():
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32)).eval()
    ids = torch.randint(5, 50, (3, 10))
    labels = torch.full_like(ids, IGNORE)
    labels[:, 2:4] = ids[:, 2:4]
    hidden = model.bert(input_ids=ids).last_hidden_state
    loss, preds, targets = masked_lm_loss(hidden, labels, model.cls)
    assert loss.item() == pytest.approx(model(input_ids=ids, labels=labels).loss.item(), abs=1e-6)
    assert preds.shape == targets.shape == (6,)
    zero, _, none = masked_lm_loss(hidden, torch.full_like(ids, IGNORE), model.cls)
    zero.backward()
    assert zero.item() == 0 and len(none) == 0 and model.cls.predictions.bias.grad is not None
