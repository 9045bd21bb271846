"""BERT-whitening on the tiny BERT: batches accumulate like the whole, k / encoder mismatches refuse with one
line, the export scores as the live module did (also through the registry), ``train(cfg)`` fits and exports."""

from __future__ import annotations

import json

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.whitening.maths import moment_sums
from sts_lightning.lightning_modules.whitening import WhiteningModule

pytestmark = pytest.mark.usefixtures("one_thread")
SENTENCES = ["a man plays a guitar .", "a dog runs in the park .", "a woman cuts an onion .",
             "two children kick a ball .", "the man plays the piano", "a child reads a book ."]


def _fitted(model_dir, k=None, pooling="first_last_avg") -> WhiteningModule:
    """A module fitted on the tiny encoder's vectors of 60 sentences, fed in 3 unequal batches."""
    module = WhiteningModule(str(model_dir), pooling=pooling, max_length=32, k=k, eval_batch_size=4)
    from sts_lightning.embeddings.methods.pooling import get_pooling

    x = module.frozen_encoder().encode([f"{s} {i}" for i in range(10) for s in SENTENCES], get_pooling(pooling))
    for batch in (x[:7], x[7:40], x[40:]):
        module.training_step([batch], 0)
    return module


def test_training_steps_accumulate_the_sums_of_all_vectors(tiny_model_dir):
    module = _fitted(tiny_model_dir)
    from sts_lightning.embeddings.methods.pooling import get_pooling

    x = module.frozen_encoder().encode([f"{s} {i}" for i in range(10) for s in SENTENCES], get_pooling("first_last_avg"))
    whole = moment_sums(x)
    assert float(module.count) == 60
    eps = torch.finfo(torch.float64).eps * 60 * 4
    torch.testing.assert_close(module.total, whole.total, rtol=eps, atol=eps * float(whole.total.abs().max()))
    torch.testing.assert_close(module.outer, whole.outer, rtol=eps, atol=eps * float(whole.outer.abs().max()))
    assert {"count", "total", "outer"} <= set(module.state_dict())  # the fit travels in checkpoints


def test_k_larger_than_the_width_is_one_line_naming_model_k(tiny_model_dir):
    with pytest.raises(ConfigError, match=r"model\.k=64 .*vector width 32"):
        WhiteningModule(str(tiny_model_dir), k=64)


@pytest.mark.parametrize(("k", "pooling"), [(None, "first_last_avg"), (8, "mean")])
def test_export_scores_as_the_live_module_also_through_the_registry(tiny_model_dir, tmp_path, k, pooling):
    from sts_lightning.embeddings.encoders.load import load_encoder
    from sts_lightning.embeddings.scoring.registry import build_scorer

    module = _fitted(tiny_model_dir, k, pooling)
    live = module.scorer().represent(SENTENCES)["embedding"]
    assert live.shape == (len(SENTENCES), k or 32)
    folder = module.export(tmp_path / "export")
    config = json.loads((folder / "whitening_config.json").read_text())
    assert config["encoder"]["hidden_size"] == 32 and len(config["encoder"]["weights_bf16_sha256"]) == 64
    assert config["fitted_vectors"] == 60 and config["k"] == k and config["pooling"] == pooling
    # Same float32 tensors on both sides: only the matmul's summation order could differ (D terms of float32).
    tol = torch.finfo(torch.float32).eps * 32 * float(live.abs().max())
    encoder = load_encoder(str(tiny_model_dir), max_length=32)
    scorer = build_scorer({"name": "whitening", "path": str(folder)}, encoder)
    torch.testing.assert_close(scorer.represent(SENTENCES)["embedding"], live, atol=tol, rtol=0)
    assert "{name:whitening,path:<export>}" in (folder / "LOADING.md").read_text()


def test_export_on_another_encoder_is_one_line_naming_both(tiny_model_dir, tmp_path):
    """Same architecture and width, other weights (one value nudged): refused; same weights by another name: fine."""
    import shutil

    from transformers import AutoModel

    from sts_lightning.embeddings.encoders.load import load_encoder
    from sts_lightning.embeddings.scoring.registry import build_scorer

    folder = _fitted(tiny_model_dir).export(tmp_path / "export")
    other = tmp_path / "other_bert"
    model = AutoModel.from_pretrained(str(tiny_model_dir))
    with torch.no_grad():
        next(model.parameters())[0, 0] += 0.5
    model.save_pretrained(other)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (tiny_model_dir / name).is_file():
            shutil.copy(tiny_model_dir / name, other / name)
    with pytest.raises(ConfigError) as err:
        build_scorer({"name": "whitening", "path": str(folder)}, load_encoder(str(other), max_length=32))
    message = str(err.value)
    assert "\n" not in message and str(folder) in message and "other_bert" in message
    assert tiny_model_dir.name in message and "other weights" in message
    copy = tmp_path / "copy_of_tiny"
    shutil.copytree(tiny_model_dir, copy)  # the same weights elsewhere (new mtimes): accepted
    build_scorer({"name": "whitening", "path": str(folder)}, load_encoder(str(copy), max_length=32))


def test_export_on_an_encoder_of_another_width_is_refused(tiny_model_dir, tmp_path):
    from sts_lightning.embeddings.encoders.static import StaticWordEncoder
    from sts_lightning.embeddings.scoring.registry import build_scorer

    folder = _fitted(tiny_model_dir).export(tmp_path / "export")
    glove = StaticWordEncoder(["a", "dog"], torch.randn(2, 16), name="tiny-glove")
    with pytest.raises(ConfigError, match="32-d vectors vs 16-d"):
        build_scorer({"name": "whitening", "path": str(folder)}, glove)


def test_unfitted_module_scores_and_exports_the_plain_pooling(tiny_model_dir, tmp_path):
    from sts_lightning.embeddings.encoders.load import load_encoder
    from sts_lightning.embeddings.methods.pooling import PoolingScorer
    from sts_lightning.embeddings.scoring.registry import build_scorer

    module = WhiteningModule(str(tiny_model_dir), max_length=32)
    assert isinstance(module.scorer(), PoolingScorer)
    plain = module.scorer().represent(SENTENCES)["embedding"]
    spec = {"name": "whitening", "path": str(module.export(tmp_path / "export"))}
    exported = build_scorer(spec, load_encoder(str(tiny_model_dir), max_length=32)).represent(SENTENCES)["embedding"]
    torch.testing.assert_close(exported, plain)
