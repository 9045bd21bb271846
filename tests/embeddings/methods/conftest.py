"""Fixtures of the objective tests that compare against sentence-transformers' loss classes."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def st_model(tiny_model_dir):
    """The tiny BERT as a ``SentenceTransformer`` in eval mode: no dropout, so both implementations see the same
    embeddings (and before any step CT's two copies are this one model)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(tiny_model_dir), device="cpu").eval()
