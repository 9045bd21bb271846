"""Your own training files (``datamodules.table_files``): .tsv / .csv / .jsonl / .parquet (or a folder) with named
columns for NLI pairs, triplets, scored pairs and sentences; default and mapped column names; named and integer
labels; score scales; each bad input one line naming the file and the row or column."""

from __future__ import annotations

import json
import logging

import pandas as pd
import pytest

from sts_lightning.datamodules.nli import NLIDataModule
from sts_lightning.datamodules.nli_readers import load_source
from sts_lightning.datamodules.nli_triplets import NLITriplets, load_triplet_source
from sts_lightning.datamodules.scored_pair_readers import load_scored_source
from sts_lightning.datamodules.scored_pairs import ScoredPairsDataModule
from sts_lightning.datamodules.sentence_files import source_paths
from sts_lightning.datamodules.sentences import SentenceDataModule
from sts_lightning.datamodules.table_files import resolve_path
from sts_lightning.embeddings.errors import ConfigError, DataError

PAIRS = [("A man plays a guitar .", "A man plays music .", "entailment"),
         ("A dog runs in the park .", "A cat sleeps .", "contradiction"),
         ("A woman cuts an onion .", "A woman cooks dinner .", "neutral")]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def one_line(err) -> str:
    message = str(err.value)
    assert "\n" not in message, message
    return message


def test_nli_tsv_with_named_labels_is_a_source_like_snli_dev(tmp_path):
    lines = ["premise\thypothesis\tlabel"] + [f'{a} "quoted\t{b}\t{y.upper()}' for a, b, y in PAIRS]
    (tmp_path / "nli.tsv").write_text("\n".join(lines) + "\n")
    dm = NLIDataModule(str(tmp_path), ["nli.tsv"], batch_size=3)  # relative to the data directory
    dm.setup("fit")
    assert dm.dataset.labels == [0, 2, 1] and dm.dataset.premises[0] == 'A man plays a guitar . "quoted'
    batch = next(iter(dm.train_dataloader()))
    assert sorted(batch["labels"].tolist()) == [0, 1, 2]


def test_nli_csv_quoted_and_parquet_with_integer_labels(tmp_path):
    pd.DataFrame({"premise": ["p, with a comma", "p2", "p3", "p4"], "hypothesis": ["h1", "h2", "h3", "h4"],
                  "label": [0, 2, -1, 1]}).to_parquet(tmp_path / "nli.parquet")
    pairs = load_source(str(tmp_path / "nli.parquet"))
    assert pairs.labels == [0, 2, 1] and pairs.unlabeled == 1  # SNLI's coding; -1 = no gold label
    (tmp_path / "nli.csv").write_text('premise,hypothesis,label\n"p, with a comma",h1,0\np2,h2,2\np3,h3,-\n')
    pairs = load_source(str(tmp_path / "nli.csv"))
    assert pairs.premises == ["p, with a comma", "p2"] and pairs.labels == [0, 2] and pairs.unlabeled == 1


def test_snli_jsonl_columns_need_no_mapping_and_other_names_map(tmp_path, monkeypatch):
    snli = [{"sentence1": a, "sentence2": b, "gold_label": y, "annotator_labels": [y]} for a, b, y in PAIRS]
    write_jsonl(tmp_path / "snli_1.0_dev.jsonl", snli)
    monkeypatch.chdir(tmp_path)  # relative to the working directory when the data directory lacks it
    assert load_source("snli_1.0_dev.jsonl", tmp_path / "elsewhere").labels == [0, 2, 1]
    write_jsonl(tmp_path / "mine.jsonl", [{"q": a, "d": b, "y": y} for a, b, y in PAIRS])
    dm = NLIDataModule(None, [str(tmp_path / "mine.jsonl")], batch_size=1,
                       columns={"premise": "q", "hypothesis": "d", "label": "y"})
    dm.setup("fit")
    assert dm.dataset.hypotheses == ["A man plays music .", "A cat sleeps .", "A woman cooks dinner ."]


def test_a_folder_is_all_its_files_and_names_each_in_messages(tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", [{"premise": a, "hypothesis": b, "label": y} for a, b, y in PAIRS * 40])
    pd.DataFrame({"premise": ["p", ""], "hypothesis": ["h", "h"], "label": ["neutral", "neutral"]}).to_parquet(
        folder / "b.parquet")
    (folder / "README.md").write_text("not data")
    pairs = load_source(str(folder))
    assert len(pairs) == 121 and pairs.skipped["empty sentence"] == 1
    with pytest.raises(DataError) as err:
        load_source(str(folder), max_malformed_fraction=0.001)
    assert "b.parquet row 2" in one_line(err)


def test_triplet_files_are_used_as_they_are_and_pairs_become_triplets(tmp_path):
    write_jsonl(tmp_path / "t.jsonl", [{"anchor": "a", "positive": "p", "negative": "n"}] * 3)
    (tmp_path / "simcse.csv").write_text("sent0,sent1,hard_neg\na,p,n\nb,q,m\n")
    write_jsonl(tmp_path / "pairs.jsonl", [{"premise": "a", "hypothesis": h, "label": y}
                                           for h, y in [("p", "entailment"), ("n", "contradiction")]])
    assert isinstance(load_triplet_source(str(tmp_path / "simcse.csv")), NLITriplets)
    mapped = load_triplet_source(str(tmp_path / "simcse.csv"), columns={"anchor": "sent1"})
    assert mapped.anchors == ["p", "q"] and mapped.negatives == ["n", "m"]
    dm = NLIDataModule(None, [str(tmp_path / "t.jsonl"), str(tmp_path / "pairs.jsonl")], batch_size=2,
                       format="triplets")
    dm.setup("fit")
    assert len(dm.dataset) == 4 and dm.dataset[3] == ("a", "p", "n")
    with pytest.raises(DataError) as err:
        NLIDataModule(None, [str(tmp_path / "t.jsonl")], format="pairs").setup("fit")
    assert "use data.format=triplets" in one_line(err) and "['anchor', 'positive', 'negative']" in str(err.value)


def test_scored_pairs_normalised_by_score_scale(tmp_path):
    (tmp_path / "sts.csv").write_text("sentence1,sentence2,score\na b,c d,0\ne f,g h,2.5\ni j,k l,5\n")
    pairs = load_scored_source(str(tmp_path / "sts.csv"), score_scale=(0, 5))
    assert pairs.scores == pytest.approx([0, 0.5, 1])
    with pytest.raises(DataError) as err:  # 0-5 scores without their scale: refused, not squeezed
        load_scored_source(str(tmp_path / "sts.csv"))
    assert "from 0 to 5" in one_line(err) and "data.score_scale=[0,5]" in str(err.value)
    pd.DataFrame({"s1": ["a", "b"], "s2": ["c", "d"], "gold": [0.25, 1.0]}).to_parquet(tmp_path / "sts.parquet")
    dm = ScoredPairsDataModule(None, [str(tmp_path / "sts.parquet")], batch_size=2,
                               columns={"sentence1": "s1", "sentence2": "s2", "score": "gold"})
    dm.setup("fit")
    assert dm.dataset.scores == [0.25, 1.0]
    with pytest.raises(ConfigError, match="score_scale"):
        ScoredPairsDataModule(None, ["x.csv"], score_scale=[5, 0])


def test_sentences_from_text_parquet_and_mapped_jsonl(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.txt").write_text("one two three\nfour five six\n")
    pd.DataFrame({"sentence": ["a b\nc", "d e", None]}).to_parquet(tmp_path / "s.parquet")
    write_jsonl(tmp_path / "s.jsonl", [{"body": "x y"}, {"body": "z w"}])
    cache = tmp_path / "cache"
    with pytest.raises(DataError) as err:  # 1 of 3 rows empty: above the default 1%
        source_paths(["s.parquet"], None, cache, None)
    assert "s.parquet: skipped 1 of 3 rows" in one_line(err) and "empty text: 1 (row 3)" in str(err.value)
    dm = SentenceDataModule(None, ["s.txt", "s.parquet", "s.jsonl"], batch_size=1, shuffle=False,
                            cache_dir=str(cache), columns={"text": "body"}, max_malformed_fraction=0.5)
    with pytest.raises(DataError, match=r"s.parquet: no column 'body' \(data.columns.text\).*\['sentence'\]"):
        dm.setup("fit")
    dm = SentenceDataModule(None, ["s.txt", "s.parquet"], batch_size=1, shuffle=False, cache_dir=str(cache),
                            max_malformed_fraction=0.5)
    dm.setup("fit")
    assert [s for b in dm.train_dataloader() for s in b["sentences"]] == [
        "one two three", "four five six", "a b c", "d e"]
    (mapped,) = source_paths(["s.jsonl"], None, cache, None, columns={"text": "body"})
    assert mapped.read_text() == "x y\nz w\n"


def test_tsv_line_with_a_stray_tab_is_skipped_and_counted(tmp_path, caplog):
    rows = [f"{a}\t{b}\t{y}" for a, b, y in PAIRS * 40]
    rows.insert(5, "a premise\twith a tab\ta hypothesis\tneutral")
    (tmp_path / "nli.tsv").write_text("premise\thypothesis\tlabel\n" + "\n".join(rows) + "\n")
    with caplog.at_level(logging.WARNING):
        pairs = load_source(str(tmp_path / "nli.tsv"))
    assert len(pairs) == 120 and pairs.skipped == {"wrong number of fields": 1}
    assert "line 7" in caplog.text


@pytest.mark.parametrize("content, expected", [
    ("premise\thypothesis\tlabel\n" + "a\tb\tentails\n" * 3, r"nli.tsv: skipped 3 of 3 rows as malformed: "
     r"unknown label 'entails': 3 \(row 1, 2, 3\).*entailment, neutral, contradiction or 0, 1, 2"),
    ("premise\thypothesis\tlabel\n" + "a\tb\t3\n", r"unknown label 3.*or 0, 1, 2"),
    ("premise\thypothesis\tgold\n" + "a\tb\tneutral\n", r"nli.tsv: no label column \(label / gold_label / "
     r"entailment_judgment; or set data.columns.label\); the file has columns \['premise', 'hypothesis', 'gold'\]"),
    ("", r"nli.tsv: empty file"),
    ("premise\thypothesis\tlabel\n", r"nli.tsv: no data rows"),
])
def test_bad_nli_files_are_one_line_naming_the_file(tmp_path, content, expected):
    (tmp_path / "nli.tsv").write_text(content)
    with pytest.raises(DataError, match=expected) as err:
        load_source(str(tmp_path / "nli.tsv"))
    one_line(err)


def test_missing_file_unsupported_type_unknown_role_and_local_hub_are_one_line(tmp_path):
    with pytest.raises(DataError) as err:
        load_source("nli.tsv", tmp_path)
    assert f"looked for {tmp_path}/nli.tsv and " in one_line(err) and "snli:dev" in str(err.value)
    with pytest.raises(ConfigError) as err:
        NLIDataModule(None, ["my/nli.xlsx"])
    assert "unsupported file type '.xlsx'; use .tsv, .csv, .jsonl, .json, .parquet" in one_line(err)
    with pytest.raises(ConfigError, match="unsupported file type '.gz'; use .txt"):
        SentenceDataModule(None, ["corpus.txt.gz"])
    with pytest.raises(ConfigError, match="unsupported file type '.txt'"):
        ScoredPairsDataModule(None, ["sts.txt"])
    with pytest.raises(ConfigError, match="unknown role in data.columns 'premis'"):
        NLIDataModule(None, ["nli.tsv"], columns={"premis": "a"})
    with pytest.raises(ConfigError) as err:
        load_source(f"hub:{tmp_path}:train")
    assert "'hub:' reads the Hugging Face hub; for a local file or folder give its path" in one_line(err)
    with pytest.raises(ConfigError, match="Hugging Face hub"):
        source_paths([f"hub:{tmp_path}:train"], None, tmp_path, None)


def test_relative_path_defaults_to_shared_data_beside_the_checkout(monkeypatch, tmp_path):
    """No paths.data_dir, no $STS_DATA_DIR: the configs' ``wiki/...`` names resolve under ../shared/data."""
    monkeypatch.delenv("STS_DATA_DIR", raising=False)
    monkeypatch.setattr("sts_lightning.embeddings.io.data_dir.CHECKOUT_DATA_DIR", tmp_path)
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "s.txt").write_text("a sentence\n")
    assert resolve_path("wiki/s.txt", None) == tmp_path / "wiki" / "s.txt"
