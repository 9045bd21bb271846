"""TSDAE's decoder (embeddings.methods.tsdae.decoder): tied parameters are the encoder's own tensors, the
decoder's own parts (cross-attention, LM-head transform) are not, and encoders without a usable causal LM fail
with one line."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.tsdae.decoder import build_decoder, parameter_aliases


def _encoder(model_dir):
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(model_dir))


def test_tied_decoder_shares_the_encoders_tensors(tiny_model_dir):
    encoder = _encoder(tiny_model_dir)
    decoder = build_decoder(str(tiny_model_dir), encoder)
    assert type(decoder).__name__ == "BertLMHeadModel" and decoder.config.is_decoder
    enc = dict(encoder.named_parameters())
    body = dict(decoder.bert.named_parameters())
    shared = [n for n in body if n in enc]
    assert shared and all(body[n] is enc[n] for n in shared)
    own = sorted(set(body) - set(enc))
    assert own and all("crossattention" in n for n in own)  # the decoder's own layers: cross-attention only
    # the LM head's output projection stays tied to the word embeddings, now the encoder's
    assert decoder.cls.predictions.decoder.weight is encoder.embeddings.word_embeddings.weight
    assert all(p is not enc[n] for n, p in decoder.cls.named_parameters() if n in enc)
    with torch.no_grad():  # a change through the encoder is seen by the decoder: one tensor
        encoder.encoder.layer[0].attention.self.query.weight.add_(1.0)
    assert torch.equal(decoder.bert.encoder.layer[0].attention.self.query.weight,
                       encoder.encoder.layer[0].attention.self.query.weight)


def test_untied_decoder_is_a_copy(tiny_model_dir):
    encoder = _encoder(tiny_model_dir)
    decoder = build_decoder(str(tiny_model_dir), encoder, tie=False)
    enc = dict(encoder.named_parameters())
    body = dict(decoder.bert.named_parameters())
    assert all(body[n] is not enc[n] and torch.equal(body[n], enc[n]) for n in body if n in enc)
    assert decoder.cls.predictions.decoder.weight is decoder.bert.embeddings.word_embeddings.weight


def test_aliases_list_each_shared_tensor_once(tiny_model_dir):
    encoder = _encoder(tiny_model_dir)
    holder = torch.nn.ModuleDict({"encoder": encoder, "decoder": build_decoder(str(tiny_model_dir), encoder)})
    aliases = parameter_aliases(holder)
    assert aliases["decoder.bert.embeddings.word_embeddings.weight"] == "encoder.embeddings.word_embeddings.weight"
    assert aliases["decoder.cls.predictions.decoder.weight"] == "encoder.embeddings.word_embeddings.weight"
    assert not any("crossattention" in a for a in aliases)
    params = dict(holder.named_parameters(remove_duplicate=False))
    assert all(params[a] is params[o] for a, o in aliases.items())
    assert len(list(holder.parameters())) == len(params) - len(aliases)


def _save(config, path):
    from transformers import AutoModel

    AutoModel.from_config(config).save_pretrained(path)
    return str(path)


def test_an_encoder_without_a_causal_lm_is_one_config_error_line(tmp_path):
    from transformers import DistilBertConfig

    path = _save(DistilBertConfig(vocab_size=50, dim=32, n_layers=1, n_heads=2, hidden_dim=64), tmp_path / "distil")
    with pytest.raises(ConfigError, match=r"no causal-LM class .*BERT-like") as err:
        build_decoder(path, _encoder(path))
    assert "\n" not in str(err.value)


def test_a_causal_lm_without_cross_attention_is_refused(tmp_path):
    from transformers import LlamaConfig

    config = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2)
    path = _save(config, tmp_path / "llama")
    with pytest.raises(ConfigError, match=r"has no cross-attention") as err:
        build_decoder(path, _encoder(path))
    assert "\n" not in str(err.value)


def test_a_masked_lm_checkpoint_brings_its_trained_lm_head(tiny_model_dir, tmp_path):
    """Domain adaptation after ``model=mlm``: a ``BertForMaskedLM`` directory's head starts the decoder's head."""
    from transformers import AutoConfig, BertForMaskedLM

    torch.manual_seed(3)
    mlm = BertForMaskedLM(AutoConfig.from_pretrained(str(tiny_model_dir)))
    mlm.save_pretrained(tmp_path / "mlm")
    encoder = _encoder(tmp_path / "mlm")
    decoder = build_decoder(str(tmp_path / "mlm"), encoder)
    for name in ("predictions.transform.dense.weight", "predictions.transform.LayerNorm.weight", "predictions.bias"):
        assert torch.equal(decoder.cls.get_parameter(name), mlm.cls.get_parameter(name)), name
    assert torch.equal(encoder.embeddings.word_embeddings.weight, mlm.bert.embeddings.word_embeddings.weight)
    assert decoder.cls.predictions.decoder.weight is encoder.embeddings.word_embeddings.weight
