"""TSDAE (lightning_modules.tsdae): one copy of the tied weights (optimizer and checkpoint), noise per rank and
step, the export is the encoder alone, and bad values are one line. The loss: tests/embeddings/methods/tsdae/."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import WORDS

SENTENCES = [" ".join(WORDS[i:i + 4 + i % 5]) for i in range(8)]


def _module(model_dir, **kwargs):
    from sts_lightning.lightning_modules.tsdae import TSDAEModule

    module = TSDAEModule(str(model_dir), max_length=32, eval_batch_size=4, **kwargs)
    module.log = lambda *args, **kw: None  # no trainer attached
    return module


def test_tied_weights_are_one_copy_in_optimizer_and_checkpoint(tiny_model_dir, one_thread):
    module = _module(tiny_model_dir)
    word = module.encoder_model.embeddings.word_embeddings.weight
    assert module.decoder.bert.embeddings.word_embeddings.weight is word
    params = [p for group in module._param_groups() for p in group["params"]]
    assert len(params) == len({id(p) for p in params}) == len([p for p in module.parameters() if p.requires_grad])
    state = module.state_dict()
    assert not any(k.startswith("decoder.bert.") and "crossattention" not in k for k in state)
    assert "decoder.cls.predictions.decoder.weight" not in state
    assert any("crossattention" in k for k in state) and "decoder.cls.predictions.transform.dense.weight" in state
    loss = module.training_step({"sentences": SENTENCES}, 0)  # train a step, then reload into a fresh module
    loss.backward()
    with torch.no_grad():
        for p in module.parameters():
            if p.grad is not None:
                p.sub_(0.1 * p.grad.sign())
    fresh = _module(tiny_model_dir)
    result = fresh.load_state_dict(module.state_dict(), strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    assert fresh.decoder.bert.embeddings.word_embeddings.weight is fresh.encoder_model.embeddings.word_embeddings.weight
    for (name, a), b in zip(module.named_parameters(), fresh.parameters(), strict=True):
        assert torch.equal(a, b), name
    module.eval(), fresh.eval()
    with torch.no_grad():
        assert torch.equal(module.loss(SENTENCES, SENTENCES), fresh.loss(SENTENCES, SENTENCES))


def test_untied_decoder_trains_its_own_copy(tiny_model_dir, one_thread):
    module = _module(tiny_model_dir, tie_decoder=False)
    assert module.decoder.bert.embeddings.word_embeddings.weight is not module.encoder_model.embeddings.word_embeddings.weight
    assert "decoder.bert.embeddings.word_embeddings.weight" in module.state_dict()
    module.training_step({"sentences": SENTENCES}, 0).backward()
    assert module.encoder_model.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0
    assert module.decoder.bert.encoder.layer[0].crossattention.self.value.weight.grad.abs().sum() > 0


def test_noise_differs_by_rank_and_step_and_repeats_on_resume(tiny_model_dir, monkeypatch):
    from sts_lightning.lightning_modules.tsdae import TSDAEModule

    module = _module(tiny_model_dir)
    at = {"rank": 0, "step": 5}
    monkeypatch.setattr(TSDAEModule, "global_rank", property(lambda self: at["rank"]))
    monkeypatch.setattr(TSDAEModule, "global_step", property(lambda self: at["step"]))
    sentences = SENTENCES * 3
    rank0 = module.noisy(sentences)
    assert module.noisy(sentences) == rank0  # a resumed run draws the same noise at the same step
    at["rank"] = 1
    assert module.noisy(sentences) != rank0  # the other rank draws its own
    at.update(rank=0, step=6)
    assert module.noisy(sentences) != rank0
    assert all(set(n.split()) <= set(s.split()) for n, s in zip(rank0, sentences, strict=True))


def test_deletion_ratio_zero_reconstructs_the_sentence_itself(tiny_model_dir):
    module = _module(tiny_model_dir, deletion_ratio=0.0)
    assert module.noisy(SENTENCES) == SENTENCES


def test_gradient_checkpointing_covers_the_decoder(tiny_model_dir, one_thread):
    module = _module(tiny_model_dir, gradient_checkpointing=True)
    assert module.decoder.is_activation_checkpointing and module.encoder_model.is_activation_checkpointing
    torch.manual_seed(0)
    module.training_step({"sentences": SENTENCES}, 0).backward()
    assert module.decoder.cls.predictions.transform.dense.weight.grad is not None


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"deletion_ratio": 1.0}, "model.deletion_ratio"), ({"deletion_ratio": -0.1}, "model.deletion_ratio"),
    ({"pooling": "nope"}, "pooling"), ({"lr": 0.0}, "model.lr"),
])
def test_bad_values_are_one_line_config_errors(kwargs, key, tiny_model_dir):
    with pytest.raises(ConfigError) as err:
        _module(tiny_model_dir, **kwargs)
    assert key in str(err.value) and "\n" not in str(err.value)


def test_export_is_the_encoder_with_its_pooling_and_says_the_decoder_is_not_in_it(tiny_model_dir, tmp_path,
                                                                                   one_thread):
    from sentence_transformers import SentenceTransformer

    module = _module(tiny_model_dir)
    module.training_step({"sentences": SENTENCES}, 0).backward()
    with torch.no_grad():
        for p in module.parameters():
            if p.grad is not None:
                p.sub_(0.1 * p.grad.sign())
    module.eval()
    with torch.no_grad():
        evaluated = module.scorer().represent(SENTENCES)["embedding"]
    folder = module.export(tmp_path / "export")
    vectors = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    torch.testing.assert_close(vectors.cpu(), evaluated, atol=1e-5, rtol=0)
    assert "decoder was used in training only" in (folder / "LOADING.md").read_text()
    assert "crossattention" not in (folder / "model.safetensors").read_bytes()[:100_000].decode("latin-1")
