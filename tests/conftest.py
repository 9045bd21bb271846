"""Shared fixtures: a tiny random BERT with a word-level vocabulary, and tiny STS data files.

Everything here is built in memory / tmp dirs so the suite runs offline on 2 CPU cores.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

from sts_lightning.embeddings import stop_request
from sts_lightning.runs.constructor_defaults import register as register_constructor_defaults
from tests.helpers import WORDS, write_train_data

register_constructor_defaults()  # the nodes configs/ departs from, for every compose() of the tests
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def no_stop_left_over():
    """A test that records a stop signal in-process (``embeddings.stop_request``) must not stop the next test's
    encoding: the flag is process-wide, as a signal is. Nor leave its handlers: a stopped run keeps the recording
    handler by design, and a later test in the same process (a pytest-xdist worker) must start from the old one."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)}
    yield
    stop_request.clear()
    for sig, handler in handlers.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


@pytest.fixture()
def one_thread():
    """Tiny tensors on a busy 2-core machine: intra-op thread hand-offs cost more than the maths."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def save_tiny_bert(path: Path, seed: int = 0) -> Path:
    """A 2-layer random BERT (hidden 32) with the word-level vocabulary, its weights drawn with ``seed``."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + WORDS
    # transformers 5 ignores `vocab_file=` here (every word became [UNK]); pass the mapping itself.
    tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.1,
                        attention_probs_dropout_prob=0.1)
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def save_tiny_masked_lm(model_dir: Path) -> Path:
    """``<model_dir>-mlm``: a ``BertForMaskedLM`` over ``model_dir``'s encoder with a seeded head, its tokenizer;
    DiffCSE's generator in the method-generic tests (``model.generator={model_dir}-mlm``). The global RNG is left
    as it was."""
    from transformers import AutoTokenizer, BertForMaskedLM, BertModel

    target = Path(f"{model_dir}-mlm")
    with torch.random.fork_rng():
        torch.manual_seed(2)
        encoder = BertModel.from_pretrained(model_dir)
        model = BertForMaskedLM(encoder.config)
    model.bert.load_state_dict(encoder.state_dict(), strict=False)  # no pooler in a masked LM
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(target)
    return target


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer random BERT (hidden 32) saved as a Hugging Face directory, a masked LM over it beside it."""
    path = save_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), seed=0)
    save_tiny_masked_lm(path)
    return path


@pytest.fixture(scope="session")
def other_tiny_model_dir(tmp_path_factory) -> Path:
    """The same architecture, width and vocabulary as ``tiny_model_dir``, other random weights (seed 1): the
    "another encoder" that a fitted export must refuse."""
    return save_tiny_bert(tmp_path_factory.mktemp("other_tiny_bert"), seed=1)


@pytest.fixture()
def tiny_encoder(tiny_model_dir):
    from sts_lightning.embeddings.encoders.hf import HFEncoder

    return HFEncoder.from_pretrained(str(tiny_model_dir), max_length=32, batch_size=4)


@pytest.fixture(scope="session")
def tiny_data_dir(tmp_path_factory) -> Path:
    """STS-B, SICK and STS12/16-style files in the original formats (a few rows each)."""
    root = tmp_path_factory.mktemp("sts_data")
    pairs = [
        ("a man plays a guitar .", "a man plays the piano .", 3.2),
        ("a woman cuts an onion .", "a woman slices a tomato .", 2.0),
        ("a dog runs in the park .", "a dog is running in the park .", 4.8),
        ("a child reads a book .", "two cats eat food .", 0.2),
        ("a girl rides a horse .", "a boy rides a bike .", 1.5),
        ("the man sings a song .", "a man is singing a song .", 4.6),
    ]
    (root / "stsb").mkdir()
    lines = [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s:.3f}\t{a}\t{b}" for i, (a, b, s) in enumerate(pairs)]
    (root / "stsb" / "sts-dev.csv").write_text("\n".join(lines) + "\n")
    (root / "stsb" / "sts-train.csv").write_text("\n".join(lines[:4]) + "\textra\tcolumns\n")
    (root / "sick").mkdir()
    sick = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
    sick += [f"{i}\t{a}\t{b}\t{1 + s * 0.8:.1f}\tNEUTRAL" for i, (a, b, s) in enumerate(pairs)]
    (root / "sick" / "SICK_trial.txt").write_text("\r\n".join(sick) + "\r\n")
    d12 = root / "sts" / "STS2012-en-test"
    d12.mkdir(parents=True)
    (d12 / "STS.input.MSRvid.txt").write_text("".join(f"{a}\t{b}\n" for a, b, _ in pairs))
    (d12 / "STS.gs.MSRvid.txt").write_text("".join(f"{s}\n" for _, _, s in pairs))
    (d12 / "STS.gs.ALL.txt").write_text("1\n")
    d16 = root / "sts" / "STS2016-en-test"
    d16.mkdir(parents=True)
    (d16 / "STS2016.input.headlines.txt").write_text("".join(f"{a}\t{b}\tsrc1\tsrc2\n" for a, b, _ in pairs))
    gold = [f"{s}" for _, _, s in pairs]
    gold[2] = ""  # blank gold line: pair not scored
    (d16 / "STS2016.gs.headlines.txt").write_text("\n".join(gold) + "\n")
    return root


@pytest.fixture(scope="module")
def train_data_dir(tmp_path_factory, tiny_data_dir) -> Path:
    """The tiny STS files plus SentEval-layout SNLI dev (pairs) and test (triplets) splits and a small wiki file."""
    return write_train_data(tiny_data_dir, tmp_path_factory.mktemp("train_data") / "data")
