"""Fault injection (issue 18): unsafe or damaged checkpoints, and what a run does with them.

Each test names the issue item it covers and fails on the code before its fix.
"""

from __future__ import annotations

import os

import pytest
import torch
from lightning.pytorch.callbacks import Callback

from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint
from tests.helpers import compose_train_config

MARKER_NAME = "payload_ran"


class _Payload:
    """Unpickling this runs code: what a crafted checkpoint would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _crafted_checkpoint(path, marker):
    torch.save({"state_dict": {}, "hyper_parameters": {}, "payload": _Payload(marker)}, path)
    return path


def test_item1_crafted_checkpoint_never_runs_code_even_when_torch_is_told_to_unpickle(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / MARKER_NAME
    ckpt = _crafted_checkpoint(tmp_path / "evil.ckpt", marker)
    with pytest.raises(DataError, match=r"evil\.ckpt: refusing to load") as err:
        load_checkpoint(ckpt)
    assert not marker.exists()
    assert "weights_only=False" not in str(err.value)  # torch's advice is not passed on for an untrusted file


@pytest.mark.parametrize("how", ["ckpt_path", "planted_last"])
def test_item1_resume_from_a_crafted_checkpoint_exits_with_one_line(how, tmp_path, monkeypatch, tiny_model_dir,
                                                                     train_data_dir, one_thread):
    from sts_lightning.runs.train_run import train

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / MARKER_NAME
    out = tmp_path / "run"
    if how == "planted_last":
        (out / "checkpoints").mkdir(parents=True)
        ckpt, arg = _crafted_checkpoint(out / "checkpoints" / "last.ckpt", marker), "last"
    else:
        ckpt = _crafted_checkpoint(tmp_path / "evil.ckpt", marker)
        arg = str(ckpt)
    cfg = compose_train_config(out, tiny_model_dir, train_data_dir, ["trainer.max_steps=2", f"ckpt_path={arg}", "export=false"])
    with pytest.raises(DataError, match="refusing to load"):
        train(cfg)
    assert not marker.exists()


def test_item8_truncated_or_misplaced_checkpoint_names_the_file(tmp_path):
    good = tmp_path / "good.ckpt"
    torch.save({"state_dict": {"w": torch.ones(3)}}, good)
    assert load_checkpoint(good)["state_dict"]["w"].sum() == 3
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(good.read_bytes()[: os.path.getsize(good) // 2])
    with pytest.raises(DataError, match=r"cut\.ckpt: not a readable checkpoint \(truncated or corrupted\?\)"):
        load_checkpoint(cut)
    (tmp_path / "dir.ckpt").mkdir()
    with pytest.raises(DataError, match=r"dir\.ckpt: a directory, not a checkpoint file"):
        load_checkpoint(tmp_path / "dir.ckpt")
    with pytest.raises(DataError, match="checkpoint file not found"):
        load_checkpoint(tmp_path / "absent.ckpt")


def test_item8_evaluate_on_a_truncated_checkpoint_names_the_file(tmp_path):
    from sts_lightning.embeddings.encoders.load import load_encoder

    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(DataError, match=r"cut\.ckpt: not a readable checkpoint"):
        load_encoder(str(cut))


def test_item2_runs_started_in_the_same_second_get_their_own_directory():
    import subprocess
    import sys

    from tests.paths import ROOT

    code = ("from omegaconf import OmegaConf; from sts_lightning.runs.run_id import register_run_id; register_run_id(); "
            "c = OmegaConf.create({'d': 'out/${run_id:}', 'e': '${d}'}); print(c.d, c.e)")
    dirs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
        first, again = done.stdout.split()
        assert first == again  # one suffix per process, however often the run dir is resolved
        dirs.append(first)
    assert dirs[0] != dirs[1]
    hydra_cfg = (ROOT / "configs" / "hydra" / "default.yaml").read_text()
    assert "${now:%Y-%m-%d_%H-%M-%S}_${run_id:}" in hydra_cfg


def test_item2_a_fresh_run_refuses_a_directory_holding_another_runs_checkpoint(tmp_path, tiny_model_dir,
                                                                                 train_data_dir, one_thread):
    from sts_lightning.embeddings.errors import ConfigError
    from sts_lightning.runs.train_run import train

    out = tmp_path / "run"
    train(compose_train_config(out, tiny_model_dir, train_data_dir, ["trainer.max_steps=2", "export=false"]))
    assert (out / "checkpoints" / "last.ckpt").is_file()
    before = (out / "checkpoints" / "last.ckpt").read_bytes()
    with pytest.raises(ConfigError, match=r"already holds a run \(.*last\.ckpt.*\): resume it with ckpt_path=last"):
        train(compose_train_config(out, tiny_model_dir, train_data_dir, ["trainer.max_steps=2", "export=false", "seed=2"]))
    assert (out / "checkpoints" / "last.ckpt").read_bytes() == before  # nothing of the first run overwritten


def _stsb_line(score: str, a: str = "a man plays a guitar .", b: str = "a man plays music .") -> str:
    return f"main-captions\tMSRvid\t2012test\t0001\t{score}\t{a}\t{b}\n"


def test_item7_gold_scores_outside_the_datasets_scale_are_refused(tmp_path):
    from sts_lightning.sts.readers import read_semeval_subset, read_sick, read_stsb

    path = tmp_path / "sts-dev.csv"
    path.write_text(_stsb_line("3.2") + _stsb_line("500"))
    with pytest.raises(DataError, match=r"sts-dev\.csv:2: score '500' is outside this dataset's 0-5 scale"):
        read_stsb(path)
    path.write_text(_stsb_line("0") + _stsb_line("5"))
    assert list(read_stsb(path).scores) == [0.0, 5.0]
    sick = tmp_path / "SICK_trial.txt"
    sick.write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\n1\ta b\tc d\t0.5\n")
    with pytest.raises(DataError, match="outside this dataset's 1-5 scale"):
        read_sick(sick)
    # item 10: a bad SemEval gold value is reported against the gold file and its line
    (tmp_path / "STS.input.x.txt").write_text("a b\tc d\ne f\tg h\n")
    (tmp_path / "STS.gs.x.txt").write_text("1.0\n7.5\n")
    with pytest.raises(DataError, match=r"STS\.gs\.x\.txt:2: score '7\.5'"):
        read_semeval_subset(tmp_path / "STS.input.x.txt", tmp_path / "STS.gs.x.txt")


def test_item10_nul_or_control_only_sentences_are_refused_but_real_quirks_kept(tmp_path):
    from sts_lightning.sts.readers import read_stsb

    path = tmp_path / "sts-dev.csv"
    path.write_text(_stsb_line("3", a="it\x12s a dog ."))  # STS 2012 / STS-B write an apostrophe as \x12
    assert read_stsb(path).sentences1 == ["it\x12s a dog ."]
    path.write_text(_stsb_line("3", a="a\x00b"))
    with pytest.raises(DataError, match=r"sts-dev\.csv:1: sentence 1 is a NUL byte"):
        read_stsb(path)
    path.write_text(_stsb_line("3", b="\x01\x02"))
    with pytest.raises(DataError, match="sentence 2 is control characters only"):
        read_stsb(path)


class BlowUpAtLastStep(Callback):
    """Ruins the weights right after the last optimizer step, as a bad final update would."""

    def __init__(self, how: str):
        self.how = how

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step >= trainer.max_steps:
            with torch.no_grad():
                for param in pl_module.parameters():
                    param.mul_(1e30) if self.how == "huge" else param.fill_(float("nan"))


@pytest.mark.parametrize("how", ["huge", "nan"])  # huge: finite weights whose forward overflows; nan: the weights
def test_item3_divergence_on_the_last_step_fails_and_exports_nothing(how, tmp_path, monkeypatch, tiny_model_dir,
                                                                       train_data_dir, one_thread):
    from sts_lightning.embeddings.errors import DivergedError
    from sts_lightning.runs import train_run

    real = train_run._instantiate_all

    def with_blowup(group):  # the callbacks group gets one more callback; the logger group stays as it is
        built = real(group)
        return [*built, BlowUpAtLastStep(how)] if any(isinstance(c, Callback) for c in built) else built

    monkeypatch.setattr(train_run, "_instantiate_all", with_blowup)
    out = tmp_path / "run"
    with pytest.raises(DivergedError, match="training diverged.*nothing exported"):
        train_run.train(compose_train_config(out, tiny_model_dir, train_data_dir, ["trainer.max_steps=2", "export=true"]))
    assert not (out / "export").exists()
    assert not list((out / "checkpoints").glob("best-*.ckpt"))  # a NaN score is never ranked best


def test_item3_a_diverged_run_exits_3_with_one_line(capsys):
    from sts_lightning.embeddings.errors import DivergedError, run_or_exit

    def diverge():
        raise DivergedError("training diverged: x")

    with pytest.raises(SystemExit) as done:
        run_or_exit(diverge)
    assert done.value.code == 3 and capsys.readouterr().err == "error: training diverged: x\n"


@pytest.mark.parametrize(("override", "message"), [
    ("model.lr=abc", r"model\.lr='abc' is not allowed: it must be a number > 0"),
    ("model.lr=-1", r"model\.lr=-1 is not allowed"),
    ("trainer.max_steps=0", r"trainer\.max_steps=0 is not allowed: it must be an integer >= 1 or -1"),
    ("data.batch_size=0", r"data\.batch_size=0 is not allowed"),
    ("model.warmup_ratio=1.0", r"model\.warmup_ratio=1\.0 is not allowed: it must be a number >= 0 and < 1"),
])
def test_item9_bad_training_numbers_fail_before_anything_loads(override, message, tmp_path, monkeypatch,
                                                               tiny_model_dir, train_data_dir):
    from sts_lightning.embeddings.errors import ConfigError
    from sts_lightning.runs import train_run

    monkeypatch.setattr(train_run, "_build", lambda *a, **k: pytest.fail("built something before the check"))
    with pytest.raises(ConfigError, match=message):
        train_run.train(compose_train_config(tmp_path / "run", tiny_model_dir, train_data_dir, [override]))


@pytest.mark.parametrize("value", ["0", "-1", "abc"])
def test_item9_bad_evaluate_batch_size_fails_before_anything_loads(value, tmp_path, monkeypatch):
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from sts_lightning.embeddings.errors import ConfigError
    from sts_lightning.runs import evaluate_run
    from tests.paths import CONFIG_DIR

    monkeypatch.setattr(evaluate_run, "load_tasks", lambda *a, **k: pytest.fail("loaded data before the check"))
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=[f"encoder.batch_size={value}", "paths.data_dir=/data"])
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path)
    with pytest.raises(ConfigError, match=r"encoder\.batch_size=.* is not allowed: it must be an integer >= 1"):
        evaluate_run.evaluate(cfg)


@pytest.mark.parametrize("damage", ["truncate", "garble", "object_array"])
def test_item5_a_damaged_sentence_index_cache_is_rebuilt(damage, tmp_path, caplog):
    import numpy as np

    from sts_lightning.datamodules.sentence_files import load_spans

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a man plays a guitar .\n\nthe dog runs .\n")
    cache = tmp_path / "cache"
    spans, stats = load_spans(corpus, cache)
    expected = np.array(spans), stats  # a copy: the cache is memory-mapped and damaged in place below
    (index,) = (cache / "sentence-index").glob("*.npy")
    data = index.read_bytes()
    if damage == "truncate":
        index.write_bytes(data[: len(data) // 2])
    elif damage == "garble":
        index.write_bytes(data[:60] + bytes(b ^ 0xFF for b in data[60:120]) + data[120:])
    else:
        np.savez(index.open("wb"), spans=np.array([object()], dtype=object), stats=np.array("{}"))
    spans, stats = load_spans(corpus, cache)
    assert spans.tolist() == expected[0].tolist() and stats == expected[1]
    assert "damaged line-index cache" in caplog.text
    assert load_spans(corpus, cache)[0].tolist() == expected[0].tolist()  # and the rebuilt file reads back


def test_item4_a_damaged_packaged_model_cache_is_rebuilt_not_loaded(tmp_path, caplog):
    from sts_lightning.embeddings.encoders import packaged as pm

    target, calls = tmp_path / "models" / "m", []

    def build(tmp):
        calls.append(1)
        (tmp / "model.safetensors").write_bytes(b"w" * 1000)
        (tmp / "config.json").write_text("{}")

    pm.materialise(target, build, "v1")
    weights = target / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:400])  # truncated after the build (a full disk, a bad copy)
    assert pm.materialise(target, build, "v1") == target and len(calls) == 2
    assert f"{weights} is 400 bytes, not 1000" in caplog.text and weights.stat().st_size == 1000
    (target / "config.json").unlink()
    pm.materialise(target, build, "v1")
    assert len(calls) == 3 and "config.json is missing" in caplog.text
    pm.materialise(target, build, "v1")  # intact: reused, nothing rebuilt
    assert len(calls) == 3


def test_item6_before_after_table_of_a_resumed_run_keeps_the_true_start(tmp_path, tiny_model_dir, train_data_dir,
                                                                          one_thread):
    from sts_lightning.runs.train_run import train

    out = tmp_path / "run"
    common = ["export=false", "callbacks.sts_evaluation.eval_at_start=true", "model.lr=5e-3", "trainer.max_epochs=20"]
    train(compose_train_config(out, tiny_model_dir, train_data_dir, ["trainer.max_steps=2", *common]))
    first = (out / "sts_before_after.md").read_text().splitlines()
    train(compose_train_config(out, tiny_model_dir, train_data_dir, ["trainer.max_steps=4", "ckpt_path=last", *common]))
    resumed = (out / "sts_before_after.md").read_text().splitlines()

    def before(rows):
        return [row.split("|")[2].strip() for row in rows[2:]]

    def after(rows):
        return [row.split("|")[3].strip() for row in rows[2:]]

    assert before(first) != after(first)  # the first leg moved the scores, so a wrong "before" would show
    assert before(resumed) == before(first)  # the true start, not the scores at the resume point (step 2)


def test_item10_a_directory_or_unreadable_file_in_place_of_a_file_is_not_called_missing(tmp_path):
    from sts_lightning.embeddings.io.input_file import require_file
    from sts_lightning.sts.readers import read_semeval_dir, read_stsb

    (tmp_path / "sts-dev.csv").mkdir()
    with pytest.raises(DataError, match=r"sts-dev\.csv: a directory, not a file"):
        read_stsb(tmp_path / "sts-dev.csv")
    (tmp_path / "STS12").write_text("a file where the folder should be")
    with pytest.raises(DataError, match=r"STS12: a file, not a directory"):
        read_semeval_dir(tmp_path / "STS12")
    (tmp_path / "link.txt").symlink_to(tmp_path / "gone.txt")
    with pytest.raises(DataError, match=r"link\.txt: a broken symbolic link"):
        require_file(tmp_path / "link.txt")
    with pytest.raises(DataError, match=r"absent\.txt: file not found$"):
        require_file(tmp_path / "absent.txt")
    with pytest.raises(DataError, match=r"file not found \(nor its directory"):
        require_file(tmp_path / "no_dir" / "x.txt")
    if os.geteuid() != 0:  # root reads everything
        locked = tmp_path / "locked.txt"
        locked.write_text("x")
        locked.chmod(0)
        with pytest.raises(DataError, match="permission denied"):
            require_file(locked)


@pytest.mark.parametrize("damage", ["garble", "truncate"])
def test_item8_evaluate_refuses_a_damaged_export_naming_the_file(damage, tmp_path, tiny_model_dir, tiny_data_dir):
    """A flipped bit keeps every weight finite (it would score silently); the manifest's checksum catches it."""
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict
    from transformers import AutoModel, AutoTokenizer

    from sts_lightning.embeddings.io.export_manifest import export_directory
    from sts_lightning.runs import evaluate_run
    from tests.paths import CONFIG_DIR

    export = tmp_path / "export"
    with export_directory(export) as tmp:  # what every trained encoder's export() writes
        AutoModel.from_pretrained(tiny_model_dir).save_pretrained(tmp)
        AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp)
    weights = export / "model.safetensors"
    data = bytearray(weights.read_bytes())
    if damage == "garble":
        data[len(data) - 5] ^= 0x01  # the low bits of the last weight: a finite value, only slightly off
        weights.write_bytes(bytes(data))
    else:
        weights.write_bytes(bytes(data[: len(data) // 2]))
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=[f"encoders=[{export}]", "scorers=[mean]",
                                                         f"paths.data_dir={tiny_data_dir}", "tasks=[stsb-dev]"])
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path / "eval")
    with pytest.raises(DataError, match=rf"{weights}: .*(checksum differs|bytes, the export manifest says)"):
        evaluate_run.evaluate(cfg)
