"""A stop while SED's / RankCSE's teachers or the cross-view AE's sources encode ends that phase at its next batch,
named (issue 48): measured, a SIGTERM during the e5 teacher (an engine whose loop checked nothing) ended the run
149 s later, after the teacher had finished, as ``SIGTERM while scoring STS``.

The slow engine here is a ``SentenceSource`` whose loop checks nothing itself and records the signal after its first
batch: only the phase around it (``embeddings.console.Phase`` and the caller's ``stretch``) can stop it.
"""

from __future__ import annotations

import shutil
import signal

import pytest
import torch

from sts_lightning.embeddings import stop_request
from sts_lightning.embeddings.console import progress
from sts_lightning.embeddings.sources.build import build_source
from sts_lightning.embeddings.sources.sentence_source import SentenceSource
from sts_lightning.embeddings.stop_request import StopRequested
from tests.helpers import WORDS

SLOW = "slow-engine"


class SlowEngine(SentenceSource):
    """Two sentences a batch through ``progress``; the signal "arrives" during batch ``signal_at`` (0: never)."""

    name = SLOW

    def __init__(self, signal_at: int = 0) -> None:
        self.signal_at, self.batches = signal_at, 0

    @property
    def dim(self) -> int:
        return 32  # the tiny BERT's width: SED's mean needs one size

    def embed(self, sentences):
        rows = []
        for start in progress(range(0, len(sentences), 2), desc="slow encode", unit="batch"):
            self.batches += 1
            if self.batches == self.signal_at:
                stop_request.request(signal.SIGTERM)
            rows.append(torch.ones(len(sentences[start:start + 2]), self.dim))
        return torch.cat(rows)

    def fingerprint(self) -> dict:
        return {"kind": SLOW}


@pytest.fixture()
def data_dir(tmp_path, tiny_data_dir):
    root = tmp_path / "data"
    shutil.copytree(tiny_data_dir, root)
    (root / "wiki").mkdir()
    lines = [" ".join(WORDS[j % len(WORDS)] for j in range(i, i + 5)) for i in range(12)]
    (root / "wiki" / "wiki_sentences_100k.txt").write_text("\n".join(lines) + "\n")
    return root


def _engines(signal_at: int):
    """``build_source`` with ``slow-engine`` built as a :class:`SlowEngine` (kept, to count its batches)."""
    built: list[SlowEngine] = []

    def build(spec, batch_size: int = 64, device: str = "cpu"):
        if spec == SLOW:
            built.append(SlowEngine(signal_at))
            return built[-1]
        return build_source(spec, batch_size=batch_size, device=device)

    return build, built


@pytest.mark.parametrize("combine,user", [("mean", "SED"), ("each", "RankCSE")])
def test_a_stop_during_a_teacher_ends_at_its_next_batch_and_names_it(tmp_path, data_dir, tiny_model_dir, monkeypatch,
                                                                      combine, user):
    from sts_lightning.datamodules import distillation

    build, built = _engines(signal_at=2)
    monkeypatch.setattr(distillation, "build_source", build)
    dm = distillation.DistillationDataModule(data_dir=str(data_dir), teachers=[str(tiny_model_dir), SLOW],
                                             cache_dir=str(tmp_path / "cache"), combine=combine)
    with pytest.raises(StopRequested) as stopped:
        dm.prepare_data()
    assert str(stopped.value) == f"SIGTERM while encoding {user} teacher {SLOW}"
    assert built[-1].batches == 2  # of 6: the batch after the signal never ran
    assert not list((tmp_path / "cache" / "distillation").glob("targets.*"))  # no half-made targets
    # the finished teacher's vectors stay cached: the next run encodes only the stopped one
    cached = [p.name for p in (tmp_path / "cache" / "distillation" / "sources").glob("*.npy")]
    assert len(cached) == 1 and SLOW not in cached[0]


def test_a_stop_between_two_teachers_names_the_next_before_it_encodes(tmp_path, data_dir, tiny_model_dir, monkeypatch):
    from sts_lightning.datamodules import distillation

    build, built = _engines(signal_at=0)
    monkeypatch.setattr(distillation, "build_source", build)
    dm = distillation.DistillationDataModule(data_dir=str(data_dir), teachers=[SLOW, str(tiny_model_dir)],
                                             cache_dir=str(tmp_path / "cache"))
    real = distillation.cached_source_vectors

    def then_signal(source, sentences, cache_dir):
        vectors = real(source, sentences, cache_dir)
        stop_request.request(signal.SIGTERM)  # arrives as the first teacher ends
        return vectors

    monkeypatch.setattr(distillation, "cached_source_vectors", then_signal)
    with pytest.raises(StopRequested) as stopped:
        dm.prepare_data()
    assert str(stopped.value) == f"SIGTERM while encoding SED teacher {tiny_model_dir}"
    assert built[-1].batches == 6  # the slow one had finished


def test_a_stop_during_a_cross_view_source_ends_at_its_next_batch_and_names_it(tmp_path, data_dir, tiny_model_dir,
                                                                             monkeypatch):
    from sts_lightning.datamodules import source_views

    build, built = _engines(signal_at=3)
    monkeypatch.setattr(source_views, "build_source", build)
    dm = source_views.SourceViewsDataModule([str(tiny_model_dir), SLOW], str(data_dir),
                                            files=["wiki/wiki_sentences_100k.txt"], cache_dir=str(tmp_path / "c"))
    with pytest.raises(StopRequested) as stopped:
        dm.prepare_data()
    assert str(stopped.value) == f"SIGTERM while encoding cross-view AE source {SLOW}"
    assert built[-1].batches == 3


def test_a_stop_while_the_align_to_source_encodes_names_it(tmp_path, data_dir, tiny_model_dir, monkeypatch):
    from sts_lightning.datamodules import distillation

    build, built = _engines(signal_at=1)
    monkeypatch.setattr(distillation, "build_source", build)
    dm = distillation.DistillationDataModule(data_dir=str(data_dir), teachers=[str(tiny_model_dir)], align_to=SLOW,
                                             cache_dir=str(tmp_path / "cache"))
    with pytest.raises(StopRequested) as stopped:
        dm.prepare_data()
    assert str(stopped.value) == f"SIGTERM while encoding SED align_to source {SLOW}"
    assert built[-1].batches == 1
