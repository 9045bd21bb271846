"""Every exporting method loads back as it was evaluated (issue 16: "Exports load as evaluated").

For each trained method (its declaration, ``embeddings.methods.registry``) and each ``eval_layers`` / ``pooling``
its model file offers, the module is built on the tiny random BERT exactly as ``train.py`` builds it (Hydra
compose + instantiate, with the method's declared tiny settings), its weights are
nudged so that an export of anything but the live weights would show, and it is exported without
training. Then:

- the export's ``LOADING.md`` names an ``evaluate.py`` command; loading the export the way that command
  does (``load_encoder`` + ``build_scorer``) gives the representation the live module's ``scorer()``
  scored during training, to 1e-5;
- every export has a ``modules.json`` (without one sentence-transformers would build mean pooling, silently, issue 48):
  a sentence-transformers directory's ``SentenceTransformer(export).encode`` gives those same vectors, to 1e-5, and
  ``AutoModel.from_pretrained`` loads it; PromptBERT's own module gives them with ``trust_remote_code=True`` (and
  is refused without it); every other export is refused in one line naming ``sts_lightning.load``;
- a pair scorer's export (a cross-encoder) gives the live pair scores through its note's scorer and through
  ``CrossEncoder(export).predict``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from sts_lightning.embeddings.io.export_note import EXPORT, NOTE_FILE
from sts_lightning.embeddings.methods.pooling import POOLINGS
from sts_lightning.embeddings.methods.registry import method
from sts_lightning.embeddings.scoring.scorer import PairScorer
from tests.helpers import EXPORT_SENTENCES, assert_same_representation, documented_scorer
from tests.method_cases import export_cases, tiny_overrides
from tests.paths import CONFIG_DIR


def _build_module(name: str, options: dict, model_dir):
    """The module ``train.py model=<name>`` would build, on the tiny model (sources: plain name + mapping)."""
    from sts_lightning.runs.train_run import _build

    tiny = str(model_dir)
    # the declared tiny settings: small nets, and what the module reads from the data config (cross_view_ae's
    # sources: a plain-name spec and a mapping, as the default configs mix them); no data is read
    overrides = [f"model={name}", "paths.data_dir=/nonexistent",
                 *tiny_overrides(name, method(name).data, model_dir, Path("/nonexistent"))]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    with open_dict(cfg):
        keys = {"model_name_or_path": tiny, "max_length": 32, "eval_batch_size": 3, **options}
        for key, value in keys.items():
            if key in cfg.model:
                cfg.model[key] = value
    module = _build(cfg.model)
    torch.manual_seed(1)
    with torch.no_grad():  # not the pretrained weights: the export must write the live ones
        for param in module.parameters():
            param.add_(0.05 * torch.randn_like(param))
    return module.eval()


@pytest.mark.parametrize(("name", "options"), export_cases())
def test_export_loads_as_evaluated(name, options, tiny_model_dir, tmp_path, one_thread):
    module = _build_module(name, options, tiny_model_dir)
    if isinstance(module.scorer(), PairScorer):  # a pair model: the scores of pairs, not vectors
        assert_pair_export_scores_as_evaluated(module, tmp_path / "export")
        return
    with torch.no_grad():
        evaluated = module.scorer().represent(EXPORT_SENTENCES)
    folder = module.export(tmp_path / "export")
    scorer, note = documented_scorer(folder)
    with torch.no_grad():
        assert_same_representation(scorer.represent(EXPORT_SENTENCES), evaluated)
    assert_sentence_transformers_loads_as_evaluated(folder, note, evaluated)


def assert_pair_export_scores_as_evaluated(module, target: Path) -> None:
    """A pair export: its note's scorer and ``CrossEncoder(export).predict`` give the live scores; the note says so."""
    from sentence_transformers import CrossEncoder

    pairs = (EXPORT_SENTENCES, EXPORT_SENTENCES[1:] + EXPORT_SENTENCES[:1])
    with torch.no_grad():
        evaluated = module.scorer().score_pairs(*pairs)
    folder = module.export(target)
    scorer, note = documented_scorer(folder)
    with torch.no_grad():
        torch.testing.assert_close(scorer.score_pairs(*pairs), evaluated, atol=1e-5, rtol=0)
    assert f'CrossEncoder("{EXPORT}")' in note and "not a sentence-transformers model" not in note
    predicted = CrossEncoder(str(folder), device="cpu").predict(list(zip(*pairs, strict=True)), convert_to_tensor=True)
    if predicted.ndim == 1:  # one label: predict's sigmoid is the evaluated score (several: the raw logits)
        torch.testing.assert_close(predicted.float().cpu(), evaluated, atol=1e-5, rtol=0)


def assert_sentence_transformers_loads_as_evaluated(folder: Path, note: str, evaluated: dict) -> None:
    """``SentenceTransformer(folder)`` gives ``evaluated`` or refuses: never another representation."""
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    from sts_lightning.embeddings.errors import ConfigError
    from sts_lightning.embeddings.io.st_refusal import custom_module_types, refused

    assert (folder / "modules.json").is_file(), "no modules.json: sentence-transformers would mean-pool it silently"
    custom = custom_module_types(folder)
    if not custom:
        assert f'SentenceTransformer("{EXPORT}")' in note and "not a sentence-transformers model" not in note
        vectors = SentenceTransformer(str(folder), device="cpu").encode(EXPORT_SENTENCES, convert_to_tensor=True)
        torch.testing.assert_close(vectors.cpu(), evaluated["embedding"].float(), atol=1e-5, rtol=0)
        assert AutoModel.from_pretrained(str(folder)).config.hidden_size == 32
        return
    own_module = not refused(folder)  # PromptBERT: its own module, the note says how it loads
    assert ("trust_remote_code=True" in note) if own_module else ("not a sentence-transformers model" in note)
    with pytest.raises(ValueError, match="trust_remote_code=True"):  # sentence-transformers' own refusal
        SentenceTransformer(str(folder), device="cpu")
    if refused(folder):
        with pytest.raises(ConfigError, match=r"cannot be loaded by sentence-transformers: .*sts_lightning\.load\(") as err:
            SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
        assert "\n" not in str(err.value)
        return
    assert "trust_remote_code=True" in note
    model = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
    vectors = model.encode(EXPORT_SENTENCES, convert_to_tensor=True, batch_size=2)  # padded batches too
    torch.testing.assert_close(vectors.cpu(), evaluated["embedding"].float(), atol=1e-5, rtol=0)


def test_cross_view_ae_run_with_plain_name_sources_exports(tmp_path, tiny_model_dir, train_data_dir, one_thread):  # noqa: F811
    """The reported crash: ``model=cross_view_ae data=source_views`` trained, validated, then lost its export."""
    from sts_lightning.runs.train_run import train
    from tests.helpers import compose_train_config as _cfg

    tiny = str(tiny_model_dir)
    cfg = _cfg(tmp_path / "run", tiny_model_dir, train_data_dir,
               ["model=cross_view_ae", "data=source_views", "data.files=[wiki/wiki_sentences_100k.txt]",
                "data.batch_size=8", f"data.cache_dir={tmp_path / 'cache'}", f"data.sources=[{tiny},{{model:{tiny},pooling:cls}}]",
                "+trainer.fast_dev_run=true", "export=true", "callbacks.sts_evaluation.tasks=[stsb-dev]"])
    train(cfg)
    scorer, note = documented_scorer(tmp_path / "run" / "export")
    evaluated = scorer.represent(EXPORT_SENTENCES)
    assert evaluated["embedding"].shape == (len(EXPORT_SENTENCES), 32)
    assert_sentence_transformers_loads_as_evaluated(tmp_path / "run" / "export", note, evaluated)


def test_ct_exports_the_kept_copy(tiny_model_dir, tmp_path, one_thread):
    module = _build_module("ct", {}, tiny_model_dir)
    module.selected_copy.fill_(2)
    with torch.no_grad():
        evaluated = module.scorer().represent(EXPORT_SENTENCES)
        other = module.scorers()["model1"].represent(EXPORT_SENTENCES)
    assert not torch.allclose(evaluated["embedding"], other["embedding"], atol=1e-3)  # the copies differ
    scorer, _ = documented_scorer(module.export(tmp_path / "export"))
    with torch.no_grad():
        assert_same_representation(scorer.represent(EXPORT_SENTENCES), evaluated)


def test_pooling_without_sentence_transformers_form(tiny_model_dir, tmp_path, monkeypatch, caplog):
    """A pooling sentence-transformers cannot reproduce: HF model + note + warning, and the refusal as its
    ``modules.json`` (no Pooling module a loader could mistake for it)."""
    from sts_lightning.embeddings.methods.pooling import cls_pool
    from sts_lightning.lightning_modules.base import EncoderModule

    monkeypatch.setitem(POOLINGS, "cls_twice", lambda batch: 2 * cls_pool(batch))
    module = EncoderModule(str(tiny_model_dir), pooling="cls_twice", max_length=32)
    with caplog.at_level(logging.WARNING):
        folder = module.export(tmp_path / "export")
    assert not (folder / "1_Pooling").exists() and not (folder / "sentence_bert_config.json").exists()
    assert "no sentence-transformers equivalent" in caplog.text
    note = (folder / NOTE_FILE).read_text()
    assert "not a sentence-transformers model" in note and "'scorers=[cls_twice]'" in note
    from sts_lightning.embeddings.io.st_refusal import refused

    assert refused(folder)


def test_layer_weights():
    from sts_lightning.embeddings.io.st_export import layer_weights

    assert layer_weights((-2, -1), 6) == (5, [1.0, 1.0])
    assert layer_weights((1, -1), 3) == (1, [1.0, 0.0, 1.0])
    assert layer_weights((1, -1), 1) == (1, [2.0])  # one layer named twice: counted twice, as our average
    assert "only 2" in layer_weights((-3, -2, -1), 1)
