"""What the before-step-1 estimate counts for SED: each source once (issue 48: SED's default align_to is its first
teacher, counted twice although the second pass reads the first's cache)."""

from __future__ import annotations

import shutil

from sts_lightning.datamodules.distillation import DistillationDataModule
from tests.helpers import WORDS


def test_a_teacher_that_is_also_the_align_to_source_is_counted_once(tmp_path, tiny_data_dir, tiny_model_dir):
    root = tmp_path / "data"
    shutil.copytree(tiny_data_dir, root)
    (root / "wiki").mkdir()
    (root / "wiki" / "wiki_sentences_100k.txt").write_text("\n".join(" ".join(WORDS[i:i + 4]) for i in range(8)))
    dm = DistillationDataModule(data_dir=str(root), teachers=[str(tiny_model_dir), "all-MiniLM-L6-v2"],
                                align_to=str(tiny_model_dir), cache_dir=str(tmp_path / "cache"))
    assert [encoder for _, encoder, _, _ in dm.pending_encodes()] == [str(tiny_model_dir), "all-MiniLM-L6-v2"]
