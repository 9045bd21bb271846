"""``python -m sts_lightning.runs.mteb_run``: the local path prints mteb's and evaluate.py's Spearman side by side; the
online path, offline, is one line and exit code 2."""

from __future__ import annotations

import pytest

from sts_lightning.runs.mteb_run import main


def test_local_run_matches_evaluate(tiny_model_dir, tiny_data_dir, tmp_path, capsys, one_thread):
    rows = main(["--model", str(tiny_model_dir), "--scorer", "sen2pro", "--option", "n_samples=2",
                 "--tasks", "stsb-dev,STS16", "--local", "--check", "--data-dir", str(tiny_data_dir),
                 "--output-dir", str(tmp_path / "out"), "--max-length", "32"])
    assert [r["task"] for r in rows] == ["local-stsb-dev", "local-STS16"]
    for row in rows:
        assert row["spearman"] == pytest.approx(row["evaluate_py"], abs=1e-6)
    out = capsys.readouterr().out
    assert "evaluate.py" in out and "not this method's score" in out  # sen2pro is not a cosine scorer
    assert any((tmp_path / "out").rglob("*.json"))


@pytest.mark.parametrize(("args", "words"), [
    (["--tasks", "STSBenchmark"], "could not download MTEB task STSBenchmark"),
    (["--tasks", "NoSuchTask"], "unknown MTEB task"),
    (["--tasks", "STSBenchmark", "--check"], "use it with --local"),
])
def test_online_errors_are_one_line(args, words, tiny_model_dir, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SystemExit) as exit_info:
        main(["--model", str(tiny_model_dir), *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and words in err and "\n" not in err
