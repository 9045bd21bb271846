"""PromptBERT (lightning_modules.promptbert): the workers' ids, training steps of both objectives, one-line errors,
and the export's note. The loss against the authors' code: tests/embeddings/methods/promptbert/test_objective.py;
the export loaded as evaluated: tests/lightning_modules/test_export_roundtrip.py."""

from __future__ import annotations

import pickle

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.shared.batch_tokens import TOKEN_IDS
from tests.helpers import WORDS

SENTENCES = [f"{a} {b} {c} ." for a, b, c in zip(WORDS[::3], WORDS[1::3], WORDS[2::3], strict=False)]
TINY = {"template": "the [X] is [MASK] .", "template2": "a [X] is [MASK] ."}  # words of the tiny vocabulary


def _module(model_dir, **kwargs):
    from sts_lightning.lightning_modules.promptbert import PromptBERTModule

    module = PromptBERTModule(str(model_dir), max_length=32, eval_batch_size=4, **{**TINY, **kwargs})
    module.log = lambda *args, **kw: None  # no trainer attached
    return module


def test_workers_make_the_step_s_ids(tiny_model_dir):
    module = _module(tiny_model_dir)
    made = pickle.loads(pickle.dumps(module.batch_tokenizer()))({"sentences": SENTENCES[:3]})[TOKEN_IDS]["sentences"]
    first, second = made
    tokenizer = module.encoder.tokenizer
    assert tokenizer.convert_ids_to_tokens(first[0]) == ["[CLS]", "the", "a", "the", "man", ".", "is", "[MASK]", ".",
                                                        "[SEP]"]
    assert [x[2:] for x in second] == [x[2:] for x in first]  # only the template's first word differs


@pytest.mark.parametrize("options", [{}, {"denoise": False, "head": "none"},
                                     {"objective": "supervised", "head": "transform", "eval_denoise": True,
                                      "template2": None, "hard_negative_weight": 0.5}])
def test_a_training_step_moves_the_loss(tiny_model_dir, options, one_thread):
    module = _module(tiny_model_dir, **options)
    batch = {"anchors": SENTENCES[:4], "positives": SENTENCES[4:8], "negatives": SENTENCES[8:12]} \
        if options.get("objective") == "supervised" else {"sentences": SENTENCES[:4]}
    module.eval()  # training_step switches dropout back on
    loss = module.training_step(batch, 0)
    assert module.encoder_model.training and torch.isfinite(loss) and loss.item() > 0
    loss.backward()
    assert module.encoder_model.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    with torch.no_grad():
        vectors = module.eval().scorer().represent(SENTENCES[:3])["embedding"]
    assert vectors.shape == (3, 32) and torch.isfinite(vectors).all()


def test_the_wrong_data_for_the_objective_is_one_line(tiny_model_dir):
    with pytest.raises(ConfigError, match=r"model.objective=supervised needs NLI triplets .*data.format"):
        _module(tiny_model_dir, objective="supervised").training_views({"sentences": SENTENCES[:3]})


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"objective": "both"}, "model.objective"), ({"head": "dense"}, "model.head"),
    ({"template": ""}, "model.template"), ({"template2": "no mask [X]"}, "model.template2"),
    ({"template": "no sentence [MASK]"}, "model.template"), ({"denoise": "yes"}, "model.denoise"),
    ({"temperature": 0.0}, "temperature"), ({"hard_negative_weight": 1.0}, "model.hard_negative_weight"),
])
def test_bad_values_are_one_line_config_errors(kwargs, key, tiny_model_dir):
    with pytest.raises(ConfigError) as err:
        _module(tiny_model_dir, **kwargs)
    assert key in str(err.value) and "\n" not in str(err.value)


def test_the_export_note_names_the_evaluated_template(tiny_model_dir, tmp_path, one_thread):
    module = _module(tiny_model_dir, template="it's [X] : [MASK] .", objective="supervised", head="transform",
                     eval_denoise=True, template2=None)
    folder = module.export(tmp_path / "export")
    note = (folder / "LOADING.md").read_text()
    assert "encoder.max_length=32" in note and "denoise:true" in note and "promptbert_head.safetensors" in note
    assert (folder / "promptbert_head.safetensors").is_file() and "trust_remote_code=True" in note
    from sts_lightning.api import load

    loaded = load(folder)  # the note's line, parsed back: the quote inside the template survives
    assert loaded.scorer.template.text == "it's [X] : [MASK] ." and loaded.scorer.denoiser is not None
    with torch.no_grad():
        torch.testing.assert_close(loaded.encode(SENTENCES[:3]), module.eval().scorer().represent(SENTENCES[:3])[
            "embedding"], atol=1e-5, rtol=0)


def test_the_export_names_the_sentence_transformers_module_that_exists():
    from sts_lightning.embeddings.methods.promptbert.head import ST_MODULE
    from sts_lightning.embeddings.methods.promptbert.st_module import PromptBERTEmbedding

    assert ST_MODULE == f"{PromptBERTEmbedding.__module__}.{PromptBERTEmbedding.__qualname__}"


def test_sentence_transformers_saves_and_reloads_the_module(tiny_model_dir, tmp_path, one_thread):
    """``SentenceTransformer.save`` of a loaded export writes what the export held: it loads back to the same vectors."""
    from sentence_transformers import SentenceTransformer

    module = _module(tiny_model_dir, objective="supervised", head="transform", eval_denoise=True, template2=None)
    folder = module.export(tmp_path / "export")
    model = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
    model.save(str(tmp_path / "saved"))
    again = SentenceTransformer(str(tmp_path / "saved"), device="cpu", trust_remote_code=True)
    torch.testing.assert_close(again.encode(SENTENCES[:3], convert_to_tensor=True),
                               model.encode(SENTENCES[:3], convert_to_tensor=True), atol=0, rtol=0)
