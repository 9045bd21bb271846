"""The field table: a pooling row and a trained row run end to end on the tiny model; parsing and summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.results import field_table
from benchmarks.results.field_rows import ROWS
from benchmarks.results.field_table import SPREAD_LEGEND, markdown, summarise


def test_every_row_declares_what_it_needs():
    keys = [row.key for row in ROWS]
    assert len(keys) == len(set(keys))
    for row in ROWS:
        assert row.kind in {"pool", "train", "on"}, row
        assert (row.kind == "train") == bool(row.overrides), row
        assert row.kind == "train" or row.scorer, row
        assert row.kind not in ("on", "train") or row.base is None or row.base in keys, row
        assert row.kind != "on" or row.base, row
        assert row.paper is None or row.paper_note, row


def test_summary_is_mean_and_std_of_the_seed_averages():
    got = summarise([{"a": 50.0, "b": 70.0}, {"a": 54.0, "b": 70.0}], ["a", "b"])
    assert got["avg"] == pytest.approx(61.0) and got["std"] == pytest.approx(2 ** 0.5) and got["seeds"] == 2
    assert got["tasks"] == {"a": 52.0, "b": 70.0} and got["task_std"] == pytest.approx({"a": 8 ** 0.5, "b": 0.0})
    once = {**summarise([{"a": 40.0, "b": 45.0}], ["a", "b"]), "intervals": {"a": [38.5, 41.25]}, "seconds": 6.0}
    table = markdown({"cls": {**got, "seconds": 60.0}, "mean": once, "flow": {"error": "exit 1: boom", "seconds": 1.0}},
                     ["a", "b"], "tiny")
    assert "| CLS pooling | 52.00 +- 2.83 | 70.00 +- 0.00 | 61.00 +- 1.41 | 29.19 |" in table
    assert "| mean pooling | 40.00 [38.50, 41.25] | 45.00 | 42.50 | 54.81 |" in table  # b: no interval computed
    assert "| + flow | failed |" in table and table.endswith(SPREAD_LEGEND)


@pytest.mark.slow  # fits and trains the tiny rows end to end: 21-74 s on 2 shared cores
def test_a_pooling_row_and_a_trained_row_end_to_end(tmp_path, tiny_model_dir, train_data_dir, monkeypatch):  # noqa: F811
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "field"
    results = field_table.main(["--backbone", str(tiny_model_dir), "--seeds", "0", "--steps", "2",
                                "--rows", "mean,sbert_nli", "--tasks", "stsb-dev", "--data-dir", str(train_data_dir),
                                "--out", str(out)])
    assert set(results) == {"mean", "sbert_nli"}
    assert all("error" not in r for r in results.values()), results
    saved = json.loads((out / "field_table.json").read_text())
    assert saved["rows"]["sbert_nli"]["avg"] == results["sbert_nli"]["avg"]
    assert (out / "sbert_nli" / "seed0" / "export" / "LOADING.md").is_file()
    # the mean row scores the untrained backbone: it equals the trained row's 'before' only by chance, so just
    # check it is a real correlation and the trained row was scored from its export
    assert -100 <= results["mean"]["avg"] <= 100
    lo, hi = results["mean"]["intervals"]["stsb-dev"]  # run once: its bootstrap interval from results.json
    assert lo <= results["mean"]["tasks"]["stsb-dev"] <= hi
    assert "| SBERT-NLI |" in (out / "field_table.md").read_text()
    # a resumed table reuses every run, and its wall column still says what the runs took when they ran
    again = field_table.main(["--backbone", str(tiny_model_dir), "--seeds", "0", "--steps", "2",
                              "--rows", "mean,sbert_nli", "--tasks", "stsb-dev", "--data-dir", str(train_data_dir),
                              "--out", str(out)])
    spent = field_table.recorded_seconds(out / "sbert_nli", [0])
    assert 0 < spent <= results["sbert_nli"]["seconds"]
    assert again["sbert_nli"]["seconds"] == pytest.approx(spent, abs=1.0)
    assert again["sbert_nli"]["avg"] == results["sbert_nli"]["avg"]


def test_recorded_seconds_count_the_rows_own_seeds_only(tmp_path):
    row = tmp_path / "simcse"
    for name, seconds in [("seed0.seconds", 100), ("seed0/eval.seconds", 10), ("seed1.seconds", 200),
                          ("seed1/eval.seconds", 20), ("eval-seed2.seconds", 7), ("seed12.seconds", 1000)]:
        (row / name).parent.mkdir(parents=True, exist_ok=True)
        (row / name).write_text(f"{seconds}\n")
    assert field_table.recorded_seconds(row, [0]) == 110
    assert field_table.recorded_seconds(row, [0, 1]) == 330
    assert field_table.recorded_seconds(row, [2]) == 7  # a pooling row's evaluate run
    assert field_table.recorded_seconds(tmp_path / "never_ran", [0]) == 0


# --- the papers table (issue 29): rows vs their references, ensemble rows, verdicts -------------------------------

FIELD_KEYS = ["cls", "mean", "first_last", "flow", "whitening", "ct", "simcse", "sbert_nli", "simcse_sup", "rankcse",
              "rankcse_listnet", "cosent", "cross_encoder", "bi_gold", "augsbert", "angle_nli", "sen2pro_first_last", "sen2pro_whitening", "sen2pro_simcse",
              "prompt", "prompt_denoise", "promptbert", "promptbert_sup", "diffcse_generator", "diffcse"]
PAPER_KEYS = ["cls", "mean", "first_last", "sbert_wk", "sbert_wk_paper", "sen2pro_first_last", "latte_mix",
              "latte_mix_js", "flow", "whitening", "ct", "simcse", "tsdae", "sbert_nli", "sed_ct", "gcca_ct",
              "cross_view_ae_ct"]


def test_the_field_table_keeps_its_rows_and_its_training_command(tmp_path, monkeypatch):
    """The running field benchmark resumes from these keys and run directories: neither may move."""
    assert [row.key for row in ROWS] == FIELD_KEYS
    calls = []
    monkeypatch.setattr(field_table, "_run", lambda args, log: calls.append((args, log)))
    flow = next(row for row in ROWS if row.key == "flow")
    export = field_table.train_row(flow, "bb", 1, 5, tmp_path)
    assert export == tmp_path / "flow" / "seed1" / "export"
    assert calls == [(["train.py", "model=flow", "model.model_name_or_path=bb", "seed=1", "trainer.max_steps=5",
                       "callbacks.sts_evaluation.tasks=[stsb-dev]", f"hydra.run.dir={tmp_path / 'flow' / 'seed1'}"],
                      tmp_path / "flow" / "seed1.log")]


def test_a_row_on_another_rows_export_trains_that_row_first_once(tmp_path, monkeypatch):
    """DiffCSE: its generator (MLM continued from the backbone, not seeded) is trained once, before the first seed."""
    calls = []

    def run(args, log):
        calls.append(args)
        run_dir = Path(next(a for a in args if a.startswith("hydra.run.dir=")).split("=", 1)[1])
        (run_dir / "export").mkdir(parents=True)
        (run_dir / "export" / "LOADING.md").touch()

    monkeypatch.setattr(field_table, "_run", run)
    diffcse = next(row for row in ROWS if row.key == "diffcse")
    for seed in (1, 2):
        field_table.train_row(diffcse, "bb", seed, 5, tmp_path)
    generator = tmp_path / "diffcse_generator" / "seed0" / "export"
    assert [c[:3] for c in calls] == [["train.py", "model=mlm", "model.lr=1.0e-4"],
                                      ["train.py", "model=diffcse", f"model.generator={generator}"],
                                      ["train.py", "model=diffcse", f"model.generator={generator}"]]
    assert "seed=0" in calls[0] and "seed=2" in calls[2]


def test_the_papers_rows_each_name_a_reference_and_a_source():
    from benchmarks.results.paper_rows import BEST_MEMBER, CLAIMS
    from benchmarks.results.paper_rows import ROWS as PAPER_ROWS

    assert [row.key for row in PAPER_ROWS] == PAPER_KEYS and set(CLAIMS) == set(PAPER_KEYS)
    field = {row.key: row for row in ROWS}
    for row in PAPER_ROWS:
        claim = CLAIMS[row.key]
        assert row.key not in field or field[row.key] == row, row  # a shared key is the same run
        assert claim.versus in {None, BEST_MEMBER, *PAPER_KEYS}, row
        assert claim.gain is None or claim.source, row
        assert (row.kind == "ensemble") == (claim.versus == BEST_MEMBER), row
        assert row.kind not in {"on", "ensemble"} or row.base in PAPER_KEYS, row
        assert row.kind != "ensemble" or "{members}" in " ".join(row.overrides), row


def test_rows_of_a_papers_subset_bring_their_references():
    from benchmarks.results.paper_rows import with_references

    assert with_references(["sed_ct"]) == ["mean", "ct", "sed_ct"]
    assert with_references(["latte_mix_js", "flow"]) == ["mean", "first_last", "latte_mix", "latte_mix_js", "flow"]


@pytest.mark.parametrize(("gain", "paper", "std", "expected"), [
    (2.0, 3.0, 0.0, "reproduces"),          # same sign, at least half the paper's size
    (1.5, 3.0, 0.0, "reproduces"),
    (1.0, 3.0, 0.0, "direction only"),      # same sign, smaller
    (-1.0, 3.0, 0.0, "does not"),           # other sign
    (0.0, 3.0, 0.0, "does not"),
    (2.0, 3.0, 2.5, "does not"),            # inside the seeds' noise
    (-2.0, -3.0, 0.5, "reproduces"),        # a claimed loss reproduced
    (2.0, None, 0.0, "-"),                  # no paper figure
    (None, 3.0, 0.0, "-"),                  # the row or its reference failed
])
def test_the_verdict_rule(gain, paper, std, expected):
    from benchmarks.results.paper_verdicts import verdict

    assert verdict(gain, paper, std) == expected


@pytest.mark.parametrize(("table", "row"), [("papers", "simcse_sup"), ("field", "sbert_wk"), ("papers", "nope")])
def test_an_unknown_row_of_the_chosen_table_is_a_one_line_error(table, row, tmp_path, capsys):
    with pytest.raises(SystemExit):
        field_table.main(["--table", table, "--backbone", "bb", "--rows", row, "--tasks", "t", "--out", str(tmp_path)])
    assert f"unknown rows ['{row}'] of the {table} table" in capsys.readouterr().err


def _fake_runs(monkeypatch):
    """``_run`` records each command and writes the export it would; ``_evaluate`` scores a run by its row."""
    from sts_lightning.embeddings.io.export_note import EXPORT

    commands, scored = [], []

    def run(args, log):
        commands.append(args)
        run_dir = next((a.split("=", 1)[1] for a in args if a.startswith("hydra.run.dir=")), None)
        export = Path(run_dir) / "export" if run_dir else Path(args[args.index("--out") + 1])
        export.mkdir(parents=True)
        (export / "LOADING.md").write_text(f"python evaluate.py encoders=[none] scorers=[{{name:x,path:{EXPORT}}}]\n")

    values = {"mean": 40.0, "simcse": 45.0, "ct/seed0": 50.0, "ct/seed1": 60.0, "sed_ct": 62.0, "gcca_ct": 55.0,
              "cross_view_ae_ct/seed0": 61.0, "cross_view_ae_ct/seed1": 60.0}

    def evaluate(encoder, scorer, tasks, seed, run_dir, extra=()):
        scored.append((encoder, scorer, seed, run_dir))
        where = str(run_dir)
        value = next(v for k, v in sorted(values.items(), key=lambda kv: -len(kv[0])) if f"/{k}/" in f"{where}/")
        return {task: value for task in tasks}

    monkeypatch.setattr(field_table, "_run", run)
    monkeypatch.setattr(field_table, "_evaluate", evaluate)
    return commands, scored


def test_ensemble_rows_train_on_the_base_rows_seeds_and_face_the_best_member(tmp_path, monkeypatch):
    commands, scored = _fake_runs(monkeypatch)
    results = field_table.main(["--table", "papers", "--backbone", "bb", "--seeds", "0,1", "--steps", "2",
                                "--rows", "sed_ct,gcca_ct,cross_view_ae_ct", "--tasks", "t", "--out", str(tmp_path)])
    ct = [tmp_path / "ct" / f"seed{s}" / "export" for s in (0, 1)]
    members = f"{ct[0]},{ct[1]}"
    trained = [c for c in commands if c[0] == "train.py"]
    assert [c[1] for c in trained] == ["model=ct"] * 2 + ["model=sed"] * 2 + ["model=cross_view_ae"] * 2
    sed0 = next(c for c in trained if c[1] == "model=sed")
    assert sed0 == ["train.py", "model=sed", "model.model_name_or_path=bb", f"data.teachers=[{members}]",
                    "data.align_to=null", "seed=0", "trainer.max_steps=2", "callbacks.sts_evaluation.tasks=[stsb-dev]",
                    f"hydra.run.dir={tmp_path / 'sed_ct' / 'seed0'}"]
    ae1 = [c for c in trained if c[1] == "model=cross_view_ae"][1]
    assert ae1[2] == f"data.sources=[{members}]" and "seed=1" in ae1
    assert not any(a.startswith("model.model_name_or_path") for a in ae1)  # the AE has no backbone of its own
    (gcca,) = [c for c in commands if c[0] == "-m"]  # closed form: one fit, whatever the seeds
    assert gcca == ["-m", "sts_lightning.fit_meta", "--method", "gcca", "--sources", members,
                    "--max-sentences", "6000", "--out", str(tmp_path / "gcca_ct" / "seed0" / "export")]
    assert (tmp_path / "gcca_ct" / "seed0.log").parent.is_dir()
    # every export is scored as its LOADING.md says
    assert ("none", f"{{name:x,path:{tmp_path / 'sed_ct' / 'seed1' / 'export'}}}", 1,
            tmp_path / "sed_ct" / "seed1" / "eval") in scored
    assert list(results) == ["mean", "ct", "sed_ct", "gcca_ct", "cross_view_ae_ct"]
    assert results["ct"]["seed_avgs"] == {"0": 50.0, "1": 60.0}
    saved = json.loads((tmp_path / "papers_table.json").read_text())["gains"]
    assert saved["sed_ct"]["versus"] == "best ct (seed 1)" and saved["sed_ct"]["gain"] == pytest.approx(2.0)
    assert saved["sed_ct"]["verdict"] == "reproduces"
    assert saved["gcca_ct"]["gain"] == pytest.approx(-5.0) and saved["gcca_ct"]["verdict"] == "does not"
    assert saved["cross_view_ae_ct"]["verdict"] == "does not"  # +0.5 is inside the AE seeds' std (0.71)
    assert saved["ct"]["versus"] == "mean" and saved["ct"]["verdict"] == "reproduces"  # +15 vs the paper's +17.24
    table = (tmp_path / "papers_table.md").read_text()
    assert "| SED from the CT students | 62.00 | 62.00 +- 0.00 | best ct (seed 1) | +2.00 | +1.54 | reproduces |" in table
    # a second run reuses every export: no command runs again
    before = len(commands)
    field_table.main(["--table", "papers", "--backbone", "bb", "--seeds", "0,1", "--steps", "2",
                      "--rows", "sed_ct,gcca_ct,cross_view_ae_ct", "--tasks", "t", "--out", str(tmp_path)])
    assert len(commands) == before


def test_a_papers_row_whose_reference_failed_has_no_verdict():
    from benchmarks.results.paper_verdicts import gains, markdown

    got = summarise([{"a": 50.0}], ["a"])
    table = gains({"mean": {"error": "exit 1: boom", "seconds": 1.0}, "ct": {**got, "seconds": 2.0}})
    assert table["ct"]["gain"] is None and table["ct"]["verdict"] == "-" and table["ct"]["versus"] == "mean"
    text = markdown({"mean": {"error": "exit 1: boom", "seconds": 1.0}, "ct": {**got, "seconds": 2.0}}, ["a"], "bb")
    assert "| mean pooling | failed | exit 1: boom | - | - | - | - | reference |" in text
    assert "| CT | 50.00 | 50.00 | mean | - | +17.24 | - |" in text


@pytest.mark.slow  # two evaluate.py runs on the tiny model: ~25 s on 2 shared cores
def test_the_papers_table_scores_sbert_wk_against_mean_pooling_end_to_end(tmp_path, tiny_model_dir, tiny_data_dir,
                                                                          monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    results = field_table.main(["--table", "papers", "--backbone", str(tiny_model_dir), "--rows", "sbert_wk_paper",
                                "--tasks", "stsb-dev", "--data-dir", str(tiny_data_dir), "--out", str(tmp_path)])
    assert list(results) == ["mean", "sbert_wk_paper"] and all("error" not in r for r in results.values()), results
    gain = json.loads((tmp_path / "papers_table.json").read_text())["gains"]["sbert_wk_paper"]
    assert gain["versus"] == "mean" and gain["gain"] == pytest.approx(results["sbert_wk_paper"]["avg"] - results["mean"]["avg"])
    assert "| SBERT-WK (paper) |" in (tmp_path / "papers_table.md").read_text()


def test_row_seeds_run_one_row_once_while_the_ensemble_keeps_its_members(tmp_path, monkeypatch):
    commands, _ = _fake_runs(monkeypatch)
    results = field_table.main(["--table", "papers", "--backbone", "bb", "--seeds", "0,1", "--steps", "2",
                                "--rows", "sed_ct,simcse", "--row-seeds", "sed_ct=1,simcse=0", "--tasks", "t",
                                "--out", str(tmp_path)])
    trained = [(c[1], next(a for a in c if a.startswith("seed="))) for c in commands if c[0] == "train.py"]
    assert trained == [("model=ct", "seed=0"), ("model=ct", "seed=1"), ("model=simcse", "seed=0"),
                       ("model=sed", "seed=1")]  # table order: ct (sed's members), simcse, sed
    assert results["simcse"]["seeds"] == 1 and results["sed_ct"]["seed_avgs"].keys() == {"1"}


@pytest.mark.parametrize("bad", ["flow", "flow=", "flow=a", "nope=0"])
def test_a_bad_row_seeds_item_is_one_line(bad, capsys):
    with pytest.raises(SystemExit):
        field_table.main(["--table", "papers", "--backbone", "bb", "--row-seeds", bad])
    err = capsys.readouterr().err
    assert "--row-seeds" in err or "unknown rows" in err
