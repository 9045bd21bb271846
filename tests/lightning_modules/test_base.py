"""``EncoderModule.export``: the same files whatever the process did before exporting (issue 38)."""

from __future__ import annotations


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
