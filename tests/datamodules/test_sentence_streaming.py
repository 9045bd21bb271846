"""Sentences streamed with ``datasets``' streaming (datamodules.sentence_streaming): local shards stand in for the
hub (unreachable here; the hub spec is checked to reach ``load_dataset`` as it always did). Every usable row once
per pass over the ranks, a new order each pass, and an exact resume that skips the done batches.
"""

from __future__ import annotations

import json

import pytest

from sts_lightning.datamodules.sentence_streaming import StreamedSentences, stream_opener
from sts_lightning.datamodules.sentences import SentenceDataModule
from sts_lightning.embeddings.errors import ConfigError, DataError


@pytest.fixture()
def shards(tmp_path):
    """3 text shards of 12 lines, 2 of them empty and 1 of a single word."""
    folder = tmp_path / "shards"
    folder.mkdir()
    for s in range(3):
        lines = [f"shard {s} sentence {i}" for i in range(12)]
        lines[3], lines[7], lines[9] = "", "   ", "lonely"
        (folder / f"part{s}.txt").write_text("\n".join(lines) + "\n")
    return folder


def _stream(folder, rank=0, world=2, **kwargs):
    open_rows, column = stream_opener([str(folder)], None)
    return StreamedSentences(open_rows, column, 2, rank, world, seed=5, buffer_size=8, min_words=2, **kwargs)


def test_each_pass_gives_every_usable_row_once_over_the_ranks_in_a_new_order(shards):
    usable = {f"shard {s} sentence {i}" for s in range(3) for i in range(12) if i not in (3, 7, 9)}
    passes = [[list(_stream(shards, rank).one_pass(p)) for rank in range(2)] for p in range(2)]
    for ranks in passes:
        together = ranks[0] + ranks[1]
        assert len(together) == len(set(together)) and set(together) == usable
    assert passes[0][0] != passes[1][0]
    unshuffled = _stream(shards, 0, 1, shuffle=False)
    assert list(unshuffled.one_pass(0))[:2] == ["shard 0 sentence 0", "shard 0 sentence 1"]


@pytest.mark.parametrize("skip", [0, 3, 7, 20])
def test_resume_continues_the_uninterrupted_stream_across_passes(shards, skip):
    stream = _stream(shards, rank=1)
    uninterrupted = [s for s, _ in zip(stream, range(80), strict=False)]  # ~14 a pass: several passes
    stream.set_epoch(0, skip_batches=skip)
    resumed = [s for s, _ in zip(stream, range(80 - 2 * skip), strict=False)]
    assert resumed == uninterrupted[2 * skip:]


def test_the_datamodule_streams_local_jsonl_and_refuses_what_a_stream_cannot_do(tmp_path):
    rows = [{"body": f"row number {i}"} for i in range(10)] + [{"body": ""}]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    dm = SentenceDataModule(None, [str(path)], batch_size=4, seed=1, streaming=True, columns={"text": "body"})
    dm.prepare_data()  # nothing to index
    batches = iter(dm.train_dataloader())
    got = [s for _ in range(5) for s in next(batches)["sentences"]]  # 20 sentences: two passes of 10
    assert sorted(got) == sorted([f"row number {i}" for i in range(10)] * 2)
    with pytest.raises(ConfigError, match="num_workers=0"):
        SentenceDataModule(None, [str(path)], num_workers=2, streaming=True).setup("fit")
    with pytest.raises(ConfigError, match="max_sentences"):
        SentenceDataModule(None, [str(path)], streaming=True, max_sentences=5)
    with pytest.raises(DataError, match="no column 'text'"):
        next(iter(SentenceDataModule(None, [str(path)], batch_size=1, streaming=True).train_dataloader()))


def test_a_hub_source_is_streamed_by_load_dataset(monkeypatch, shards):
    import datasets

    calls = []
    real = datasets.load_dataset

    def fake(*args, **kwargs):
        calls.append((args, kwargs))
        return real("text", data_files=[str(p) for p in sorted(shards.iterdir())], split="train", streaming=True)

    monkeypatch.setattr(datasets, "load_dataset", fake)
    open_rows, column = stream_opener(["hub:wikitext:wikitext-103-raw-v1:train"], None)
    stream = StreamedSentences(open_rows, column, 1, shuffle=False)
    assert next(iter(stream)) == "shard 0 sentence 0"
    assert calls == [(("wikitext", "wikitext-103-raw-v1"), {"split": "train", "streaming": True})]
    with pytest.raises(ConfigError, match="one hub: source"):
        stream_opener(["hub:a:train", str(shards)], None)
