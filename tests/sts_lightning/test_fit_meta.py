"""``sts_lightning.fit_meta`` fits the training-free meta-embeddings; the cross-view AE has one front door, ``train.py``."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.fit_meta import fit_and_export
from tests.paths import ROOT


def test_method_ae_points_to_the_train_command_before_reading_anything(tmp_path):
    args = argparse.Namespace(method="ae", sources="all-MiniLM-L6-v2,glove", files="a.txt,b.txt",
                              data_dir="/nonexistent", cache_dir=None, max_sentences=6000, max_words=59, d=384,
                              tau=10.0, align_to=None, align_mean=False, out=str(tmp_path / "out"))
    with pytest.raises(ConfigError) as err:
        fit_and_export(args)
    message = str(err.value)
    assert "\n" not in message and not (tmp_path / "out").exists()
    assert ("python train.py model=cross_view_ae 'data.sources=[all-MiniLM-L6-v2,glove]' 'data.files=[a.txt,b.txt]' "
            "paths.data_dir=/nonexistent data.max_sentences=6000 model.d=384") in message


def test_the_command_line_says_it_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "sts_lightning.fit_meta", "--method", "ae", "--sources", "glove",
                           "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "python train.py model=cross_view_ae" in done.stderr and "Traceback" not in done.stderr
