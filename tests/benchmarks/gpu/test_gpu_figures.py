"""benchmarks/gpu/gpu_figures.py: the records of every benchmark become one table with the machine; cut checks show."""

from __future__ import annotations

import json

from benchmarks.gpu.gpu_figures import append_record, main, render

ENCODE = {"bench": "encode", "model": "random bert-base", "precision": "bf16", "peer_precision": "bf16",
          "sentences": 20000, "ours_sps": 30000.0, "st_sps": 7000.0, "st_batch": 512, "ratio": 4.29,
          "ours_tps": 950000.0, "mfu_ours": 0.31, "mfu_st": 0.07, "idle_ours": 0.05, "idle_st": None,
          "mem_ours_mib": 900.0, "mem_st_mib": 1200.0, "spearman_ours": 40.0, "spearman_st": 40.01}
TRAIN = {"bench": "train", "method": "mlm", "model": "random bert-base", "max_length": 128, "precision": "bf16-mixed",
         "peer_precision": "bf16-mixed", "ours_ms": 50.0, "st_ms": 80.0, "ratio": 1.6, "ours_tps": 1e5,
         "mfu_ours": 0.36, "mfu_st": 0.2, "idle_ours": 0.02, "idle_st": 0.1, "mem_ours_mib": 5000.0, "mem_st_mib": 6000.0}
E2E = {"bench": "e2e", "run": "simcse", "precision": "bf16-mixed", "steps": 140, "steps_per_s": 30.5,
       "tokens_per_s": 120000.0, "mfu": 0.2, "idle_fraction": 0.08}


def test_render_has_every_section_and_marks_cut_checks():
    checks = [{"check": "encode_bert_base", "rc": 0, "seconds": 100, "budget": 150},
              {"check": "train_steps", "rc": 124, "seconds": 120, "budget": 120},
              {"check": "e2e_mlm", "rc": None, "seconds": 0, "budget": 0, "note": "skipped: no time left"}]
    text = render({"card": "NVIDIA H200", "driver": "580"}, [ENCODE, TRAIN, E2E], checks)
    assert "Card: card NVIDIA H200, driver 580" in text
    assert "| random bert-base | bf16 / bf16 | 20,000 | 30,000 | 7,000 (512) | **4.29x** |" in text
    assert "| mlm | random bert-base | 128 | bf16-mixed / bf16-mixed | 50.0 | 80.0 | **1.60x** |" in text
    assert "| simcse | bf16-mixed | 140 | 30.50 | 120,000 | 0.200 | 8.0% |" in text
    assert "| train_steps | 124 | 120 | 120 | cut: over its time budget |" in text
    assert "| e2e_mlm | None | 0 | 0 | skipped: no time left |" in text
    assert render({}, [], []).count("(no figures: the check was not run, cut or failed)") == 3


def test_main_reads_the_records_and_writes_md_and_json(tmp_path, capsys):
    records = tmp_path / "records"
    append_record(records / "encode.jsonl", ENCODE)
    append_record(records / "e2e.jsonl", E2E)
    append_record(None, TRAIN)  # no file: nothing written
    main(["--records", str(records), "--out", str(tmp_path / "out")])
    data = json.loads((tmp_path / "out" / "gpu_figures.json").read_text())
    assert [r["bench"] for r in data["records"]] == ["e2e", "encode"] and data["machine"]["torch"]
    assert "## Encode" in (tmp_path / "out" / "gpu_figures.md").read_text()
