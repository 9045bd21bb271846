"""``EncoderModule``: the same export files whatever the process did before exporting (issue 38); length-sorted
forward groups on a CPU only (issue 39); ``matryoshka_dims`` refused, before the model loads, by a method that has no
one-vector loss to apply to each prefix (issue 41)."""

from __future__ import annotations

import pytest
import torch


def test_the_exported_tokenizer_does_not_depend_on_whether_the_process_encoded_before(tmp_path, tiny_model_dir):
    from sts_lightning.lightning_modules.simcse import SimCSEModule

    module = SimCSEModule(str(tiny_model_dir), max_length=16, eval_batch_size=4)
    # as a packaged tokenizer loads (its file pads and truncates at 128), or as another caller left it
    module.encoder.tokenizer(["a b"], padding="max_length", truncation=True, max_length=24)
    module.export(tmp_path / "fresh")  # a resumed run that only exports
    module.encoder.tokenize(["a b c", "d"])
    module.export(tmp_path / "used")  # a run that scored STS just before
    fresh, used = ((tmp_path / d / "tokenizer.json").read_bytes() for d in ("fresh", "used"))
    assert fresh == used


def test_length_groups_on_a_cpu_one_pass_on_a_gpu(tiny_model_dir, monkeypatch):
    """A CPU saves padding arithmetic with length-sorted groups; a GPU is launch-bound: one pass (issue 39)."""
    from sts_lightning.lightning_modules import base
    from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule

    module = SBERTNLIModule(str(tiny_model_dir), max_length=16)
    assert module.forward_groups() == module.length_buckets == 2
    seen = []
    monkeypatch.setattr(base, "embed_length_buckets", lambda encoder, pool, ids, groups: seen.append(groups))
    module.embed_ids([[2, 9, 3]] * 16)
    module._device = torch.device("cuda", 0)  # where Lightning moved the module (no card needed to ask)
    assert module.forward_groups() == 1
    module.embed_ids([[2, 9, 3]] * 16)
    assert seen == [2, 1]


@pytest.mark.parametrize("module, options", [("sed:SEDModule", {}), ("tsdae:TSDAEModule", {}),
                                             ("sbert_nli:SBERTNLIModule", {"objective": "softmax"})])
def test_matryoshka_is_refused_where_no_one_vector_loss_takes_it(module, options):
    import importlib

    from sts_lightning.embeddings.errors import ConfigError

    name, cls = module.split(":")
    klass = getattr(importlib.import_module(f"sts_lightning.lightning_modules.{name}"), cls)
    with pytest.raises(ConfigError, match="model.matryoshka_dims"):
        klass("/nonexistent/model", matryoshka_dims=[16], **options)  # the path would fail next: checked first
