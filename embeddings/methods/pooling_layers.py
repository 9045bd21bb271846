"""Which ``hidden_states`` each layer-averaging pooling averages: plain data, importable without torch.

Why its own module: ``embeddings.methods.pooling`` builds the pooling functions from this table, and the
sentence-transformers export (``embeddings.io.st_export``) reads the same table to build a pipeline that
reproduces them; the packaged-model builders and ``--help`` import that export path, and must not pay for torch.
"""

from __future__ import annotations

LAYER_POOLINGS: dict[str, tuple[int, ...]] = {
    "first_last_avg": (1, -1),
    "last2_avg": (-2, -1),
    "last3_avg": (-3, -2, -1),
}
