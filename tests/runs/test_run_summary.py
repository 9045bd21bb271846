"""The closing summary of a run is built from the files the run wrote."""

from __future__ import annotations

from sts_lightning.runs.run_summary import run_summary


def test_summary_names_table_checkpoint_export_and_next_commands(tmp_path):
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "modules.json").write_text("[]")
    (tmp_path / "sts_before_after.md").write_text("| task | before | after | change |\n| average | 47.00 | 60.00 | +13.00 |\n")
    text = run_summary(tmp_path, 125.0, str(tmp_path / "best-step9.ckpt"), 71.234, "val/stsb-dev_spearman", True)
    assert "run finished in 2m05s" in text and "| average | 47.00 | 60.00 | +13.00 |" in text
    assert "best-step9.ckpt (val/stsb-dev_spearman 71.23)" in text
    assert f"export: {tmp_path / 'export'}" in text and "SentenceTransformer(" in text
    assert f"python evaluate.py 'encoders=[{tmp_path / 'export'}]'" in text and "sts_lightning.runs.compare_runs" in text


def test_no_export_no_next_commands(tmp_path):
    text = run_summary(tmp_path, 3.0, exported=False)
    assert "export:" not in text and "next:" not in text and "before / after" not in text


def test_next_command_follows_the_exports_loading_note(tmp_path):
    from sts_lightning.embeddings.io.export_note import evaluate_command, write_loading_note

    (tmp_path / "export").mkdir()
    write_loading_note(tmp_path / "export", "a meta-embedding", evaluate_command(["none"], "{name:meta,path:<export>}"))
    text = run_summary(tmp_path, 1.0, exported=True)
    assert f"scorers=[{{name:meta,path:{tmp_path / 'export'}}}]" in text and "encoders=[none]" in text


def test_an_installed_package_names_its_commands(tmp_path, monkeypatch):
    """No checkout (a wheel): no train.py / evaluate.py to run, so the next commands are sts-evaluate / sts-train."""
    from sts_lightning.embeddings.io import package_files
    from sts_lightning.embeddings.io.export_note import evaluate_command, write_loading_note

    monkeypatch.setattr(package_files, "CHECKOUT", None)
    (tmp_path / "export").mkdir()
    write_loading_note(tmp_path / "export", "a CLS encoder", evaluate_command(["<export>"], "cls"))
    text = run_summary(tmp_path, 1.0, exported=True)
    assert f"sts-evaluate 'encoders=[{tmp_path / 'export'}]' 'scorers=[cls]'" in text
    assert "sts-train --help" in text and "python evaluate.py" not in text and "python train.py" not in text


def test_summary_states_the_run_directorys_size_counting_a_shared_file_once(tmp_path):
    """Issue 48: what the run takes on disk; best and last.ckpt of one step are one file (two names)."""
    import os

    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"x" * 2_500_000)
    os.link(tmp_path / "checkpoints" / "last.ckpt", tmp_path / "checkpoints" / "best-step3.ckpt")
    (tmp_path / "config.yaml").write_bytes(b"y" * 500_000)
    text = run_summary(tmp_path, 1.0)
    assert "run directory: 3.0 MB (1 file shared by two names, counted once)" in text


def test_summary_names_what_sentence_transformers_needs(tmp_path):
    """PromptBERT's own module needs trust_remote_code=True; a refused export gets no SentenceTransformer line."""
    from sts_lightning.embeddings.io.st_refusal import write_refusal
    from sts_lightning.embeddings.methods.promptbert.head import write_prompt_export

    (tmp_path / "export").mkdir()
    write_prompt_export(tmp_path / "export", {"template": "[X] [MASK]", "denoise": False, "max_length": 32}, None)
    assert "trust_remote_code=True) and AutoModel" in run_summary(tmp_path, 1.0, exported=True)
    write_refusal(tmp_path / "export", "a BERT-flow export")
    assert "SentenceTransformer(" not in run_summary(tmp_path, 1.0, exported=True)


def test_summary_names_the_cross_encoder_loader_of_a_pair_export(tmp_path):
    """A CrossEncoder directory loads with CrossEncoder (sentence-transformers would mean-pool it as a
    SentenceTransformer: never suggested)."""
    from sts_lightning.embeddings.methods.cross_encoder.pair_model import write_cross_encoder_files

    (tmp_path / "export").mkdir()
    write_cross_encoder_files(tmp_path / "export", 1)
    text = run_summary(tmp_path, 1.0, exported=True)
    assert f"loads with CrossEncoder({str(tmp_path / 'export')!r})" in text and "SentenceTransformer(" not in text
