"""``python -m sts_lightning.runs.mine_negatives``: a pair file (or NLI data) in, a triplet file the trainer reads out."""

from __future__ import annotations

import json
import logging

import pytest

from sts_lightning.datamodules.hard_negatives import MiningOptions, mine_triplets
from sts_lightning.datamodules.nli_triplets import load_triplet_source
from sts_lightning.runs import mine_negatives
from tests.helpers import MINING_ANCHORS as ANCHORS
from tests.helpers import MINING_POSITIVES as POSITIVES
from tests.helpers import NLI_TRIPLET_ROWS, compose_train_config


def _write_pairs(path, anchors=ANCHORS, positives=POSITIVES):
    path.write_text("".join(json.dumps({"anchor": a, "positive": p}) + "\n" for a, p in zip(anchors, positives, strict=True)))
    return path


def _run(capsys, *argv):
    mine_negatives.main([str(a) for a in argv])
    return capsys.readouterr().out


@pytest.mark.parametrize("suffix", [".tsv", ".jsonl", ".csv"])
def test_writes_the_mined_triplets_as_a_file_the_triplet_reader_takes(tmp_path, tiny_model_dir, tiny_encoder,
                                                                      capsys, suffix):
    from sts_lightning.embeddings.methods.pooling import PoolingScorer

    out = tmp_path / f"mined{suffix}"
    said = _run(capsys, "--pairs", _write_pairs(tmp_path / "pairs.jsonl"), "--encoder", tiny_model_dir,
                "--out", out, "--range-min", 1, "--range-max", 8, "--num-negatives", 2, "--max-length", 32,
                "--device", "cpu")
    scorer = PoolingScorer(tiny_encoder, "mean")
    want = mine_triplets(ANCHORS, POSITIVES, lambda t: scorer.represent(t)["embedding"].float(),
                         MiningOptions(range_min=1, range_max=8, num_negatives=2))
    got = load_triplet_source(str(out))
    assert (got.anchors, got.positives, got.negatives) == (want.anchors, want.positives, want.negatives)
    assert f"{len(want)} triplets from {len(ANCHORS)} pairs" in said and "data.format=triplets" in said


def test_nli_data_gives_its_entailed_pairs(train_data_dir):
    anchors, positives = mine_negatives.read_pairs("snli:test", str(train_data_dir))
    entailed = [(p, h) for p, h, y in NLI_TRIPLET_ROWS if y == "entailment"]
    assert list(zip(anchors, positives, strict=True)) == entailed


def test_mined_file_trains_sbert_nli_on_triplets(tmp_path, tiny_model_dir, train_data_dir, capsys, caplog):
    from sts_lightning.runs.train_run import train

    out = tmp_path / "mined.tsv"
    _run(capsys, "--pairs", _write_pairs(tmp_path / "pairs.jsonl"), "--encoder", tiny_model_dir, "--out", out,
         "--num-negatives", 1, "--device", "cpu")
    cfg = compose_train_config(tmp_path / "run", tiny_model_dir, train_data_dir,
                               ["model=sbert_nli", "data=nli", "data.format=triplets", "model.objective=mnrl",
                                f"data.sources=[{out}]", "trainer.max_steps=2", "~callbacks.sts_evaluation",
                                "~callbacks.model_checkpoint", "export=false"])
    with caplog.at_level(logging.INFO):
        train(cfg)
    assert "2 optimizer steps" in caplog.text and "stopped by trainer.max_steps=2" in caplog.text


@pytest.mark.parametrize(("args", "named"), [
    (["--range-min", "4", "--range-max", "4"], "--range-min (4) must be smaller than --range-max (4)"),
    (["--absolute-margin", "-1"], "--absolute-margin must be >= 0"),
    (["--relative-margin", "1"], "--relative-margin must be in [0, 1)"),
    (["--out", "OUT.txt"], "--out"),
    (["--pairs", "missing.tsv"], "missing.tsv: not found"),
    (["--pairs", "NOCOLUMNS"], "no anchor / positive columns"),
])
def test_bad_input_is_one_line_before_the_encoder_loads(tmp_path, monkeypatch, capsys, args, named):
    monkeypatch.setattr(mine_negatives, "load_encoder", lambda *a, **k: pytest.fail("the encoder loaded before the check"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cols.tsv").write_text("query\tdoc\na b\tc d\n")
    argv = {"--pairs": str(_write_pairs(tmp_path / "pairs.jsonl")), "--encoder": "nowhere",
            "--out": str(tmp_path / "out.tsv")}
    for key, value in zip(args[::2], args[1::2], strict=True):
        argv[key] = str(tmp_path / "cols.tsv") if value == "NOCOLUMNS" else value.replace("OUT", str(tmp_path))
    with pytest.raises(SystemExit) as code:
        mine_negatives.main([s for kv in argv.items() for s in kv])
    err = capsys.readouterr().err.strip()
    assert code.value.code == 2 and named in err and "\n" not in err


def test_an_unknown_encoder_is_one_line_naming_the_option(tmp_path, capsys):
    with pytest.raises(SystemExit) as code:
        mine_negatives.main(["--pairs", str(_write_pairs(tmp_path / "pairs.jsonl")), "--encoder",
                             str(tmp_path / "no-model"), "--out", str(tmp_path / "out.tsv"), "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code.value.code == 2 and err.startswith("error: --encoder: cannot load encoder") and "\n" not in err
