"""Every export carries a model card (``README.md``, ``embeddings.io.model_card``): one short training run per
trained method (from the declarations, as ``test_model_defaults`` does) must export a card that names the
method, its declared paper, the base model, the data, the steps and the STS table, with front-matter a Hugging Face reader
parses; ``SentenceTransformer`` must still load an sentence-transformers export and keep the card as ours.
"""

from __future__ import annotations

import json

import pytest
import yaml

from sts_lightning.embeddings.io.export_manifest import MANIFEST_FILE, verify_export
from sts_lightning.embeddings.io.model_card import CARD_FILE, WALL_TIME
from sts_lightning.embeddings.methods.registry import method
from tests.method_cases import model_names, st_export_names


def front_matter(text: str) -> dict:
    assert text.startswith("---\n"), text[:80]
    return yaml.safe_load(text.split("---\n")[1])


@pytest.fixture(scope="module", params=model_names())
def exported(request, method_run):
    """(method, run directory) of the session's 3-step run of ``model=<method>`` with its own data group, exported
    (``tests/runs/conftest.py``)."""
    return request.param, method_run(request.param)[1]


def test_every_export_has_a_card_naming_method_base_data_steps_and_sts(exported, tiny_model_dir):
    model, run = exported
    export = run / "export"
    text = (export / CARD_FILE).read_text()
    assert CARD_FILE in json.loads((export / MANIFEST_FILE).read_text())["files"]  # written before the manifest
    assert verify_export(export) is True
    meta = front_matter(text)
    pair = method(model).pair_export  # a CrossEncoder: sentence-transformers' text-ranking model
    assert model in meta["tags"] and meta["pipeline_tag"] == ("text-ranking" if pair else "sentence-similarity")
    assert "base_model" not in meta  # a local directory is no Hub id (the body names it, below)
    assert meta["library_name"] == ("sentence-transformers" if model in st_export_names() or pair else "transformers")
    assert f"(`{model}`)" in text and f"- paper: {method(model).citation}" in text and "- paper: none" not in text
    assert f"- base model: `{tiny_model_dir}`" in text
    data = next(line for line in text.splitlines() if line.startswith("- data: "))
    assert data != "- data: unknown" and "- training rows (after filtering): unknown" not in text
    if method(model).data == "nli":  # sources are counted in labelled pairs, whatever the format builds from them
        assert "labelled NLI pairs)" in data
    assert "- steps: 3" in text and WALL_TIME in text and "- precision: 32-true" in text
    assert "| task | before | after | change |" in text and "stsb-dev" in text  # the callback's table
    assert [r["dataset"]["name"] for r in meta["model-index"][0]["results"]] == ["stsb-dev"]
    config = yaml.safe_load(text.split("```yaml\n")[1].split("```")[0])  # the resolved config, parsed back
    assert config["model"]["_target_"] and config["output_dir"] == "<run dir>" and "ckpt_path" not in config
    assert "## How to load" in text and "python evaluate.py" in text  # the LOADING.md text, embedded


def test_the_export_is_the_kind_its_declaration_names(exported):
    """``sentence-transformers``: a ``modules.json``; ``cross-encoder``: a ``CrossEncoder`` directory; a fitted format tag: the config JSON that carries the tag."""
    model, run = exported
    export, declared = run / "export", method(model).export
    if declared == "sentence-transformers":
        assert (export / "modules.json").is_file()
    elif declared == "cross-encoder":
        assert json.loads((export / "config_sentence_transformers.json").read_text())["model_type"] == "CrossEncoder"
    else:
        configs = [json.loads(p.read_text()) for p in export.glob("*_config.json")]  # tokenizer_config.json too
        tags = [c["format"] for c in configs if isinstance(c, dict) and "format" in c]
        assert tags == [declared], (model, tags)


def test_the_card_reads_as_hugging_face_card_data(exported):
    from huggingface_hub import ModelCard

    model, run = exported
    card = ModelCard.load(run / "export" / CARD_FILE)
    assert model in card.data.tags
    assert card.data.eval_results and card.data.eval_results[0].dataset_name == "stsb-dev"


@pytest.mark.parametrize("exported", sorted(st_export_names()), indirect=True)  # the declared ST exports only
def test_sentence_transformers_loads_the_export_and_keeps_our_card(exported, tmp_path):
    model, run = exported
    from sentence_transformers import SentenceTransformer

    text = (run / "export" / CARD_FILE).read_text()
    assert 'SentenceTransformer("<export>")' in text
    st = SentenceTransformer(str(run / "export"), device="cpu")
    assert st.encode(["a sentence"]).shape[0] == 1
    assert st._model_card_text == text  # what sentence-transformers 6 reads as the model card
    st.save(str(tmp_path / "saved"))  # no training happened: it writes our card back, not one of its own
    assert (tmp_path / "saved" / CARD_FILE).read_text() == text


def test_an_export_outside_a_training_run_says_what_is_unknown(tmp_path, tiny_model_dir):
    from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule

    module = SBERTNLIModule(str(tiny_model_dir), max_length=32)
    text = (module.export(tmp_path / "export") / CARD_FILE).read_text()
    meta = front_matter(text)
    assert "base_model" not in meta and "sbert_nli" in meta["tags"] and "model-index" not in meta  # local base
    assert f"- base model: `{tiny_model_dir}`" in text
    assert "Sentence-BERT" in text and "Reimers" in text and 'SentenceTransformer("<export>")' in text
    assert "Unknown: this export was written outside a training run" in text


def test_a_meta_embedding_fitted_by_fit_meta_has_a_card(tmp_path, tiny_model_dir, train_data_dir, one_thread):
    import argparse

    from sts_lightning.fit_meta import fit_and_export

    args = argparse.Namespace(method="gcca", sources=str(tiny_model_dir), files="wiki/wiki_sentences_100k.txt",
                              data_dir=str(train_data_dir), cache_dir=str(tmp_path / "cache"), max_sentences=None,
                              max_words=59, d=None, tau=1.0, loss="mse", hidden_layers=0, epochs=1, batch_size=16,
                              seed=0, out=str(tmp_path / "m"), align_to=None, align_mean=False)
    fit_and_export(args)
    text = (tmp_path / "m" / CARD_FILE).read_text()
    assert verify_export(tmp_path / "m") is True
    meta = front_matter(text)
    assert "meta_gcca" in meta["tags"] and meta["library_name"] == "transformers"
    assert "Poerner" in text and "- data: `wiki/wiki_sentences_100k.txt`" in text and "- training rows (after filtering): 40 sentences" in text
    assert "method: gcca" in text and "scorers=[{name:meta,path:<export>}]" in text
    assert "AutoModel" not in text  # no single encoder gives any part of a meta-embedding
