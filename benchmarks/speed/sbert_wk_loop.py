"""SBERT-WK as a plain per-sentence / per-token / per-layer numpy loop: the independent reference.

Why it exists: ``embeddings.methods.sbert_wk.sbert_wk_pool`` computes the same numbers in a vectorised,
closed form (a Gram matrix per token instead of one QR per token and layer). This file re-derives
the authors' behaviour (``utils.dissecting`` of BinWang28/SBERT-WK-Sentence-Embedding) the slow,
literal way - numpy QR of each window matrix, Python slice semantics for the layer windows - so the
tests can check the fast version against it and ``sbert_wk_speed.py`` can time it as the peer.
It is written independently of the authors' code and of the vectorised one; keep it literal.
"""

from __future__ import annotations

import numpy as np


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm; zero rows stay zero (as sklearn's ``normalize``)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1, norms)


def _unify_token(token_layers: np.ndarray, window: int) -> np.ndarray:
    """One token's unified vector: layers weighted by inverse alignment and novelty.

    Args:
        token_layers: ``(layers, hidden)`` states of one token, layers from ``layer_start`` on.
        window: context half-width m.
    """
    n_layers = token_layers.shape[0]
    alignment = np.zeros(n_layers)
    novelty = np.zeros(n_layers)
    for k in range(n_layers):
        # Python slicing on purpose: k - window < 0 wraps (usually to an empty slice), the right
        # side is truncated at the top layer. That is what the authors' code does.
        left = token_layers[k - window : k]
        right = token_layers[k + 1 : k + window + 1]
        rows = np.vstack([left, right, token_layers[k][None, :]])
        _, r_mat = np.linalg.qr(rows.T)  # reduced QR: r_mat is (rows, rows)
        r = r_mat[:, -1]
        context = r_mat[:-1, :-1]
        unit_context = context / np.linalg.norm(context, axis=0, keepdims=True)
        score = unit_context.mean(axis=1).dot(r[:-1]) / np.linalg.norm(r[:-1])
        alignment[k] = 1.0 / (score * rows.shape[0] * 2)
        novelty[k] = abs(r[-1]) / np.linalg.norm(r)
    alpha = alignment / alignment.sum() + novelty / novelty.sum()
    alpha = alpha / alpha.sum()
    return token_layers.T.dot(alpha)


def _token_variance(token_layers: np.ndarray) -> float:
    """Variance (ddof 0) of the cosines between consecutive layers of one token."""
    unit = _unit_rows(token_layers)
    sim = unit @ unit.T
    return float(np.var(np.diagonal(sim, offset=-1)))


def sbert_wk_loop(all_layer_embedding: np.ndarray, masks: np.ndarray, layer_start: int = 4,
                  window: int = 2) -> np.ndarray:
    """SBERT-WK sentence vectors, one sentence, token and layer at a time (the authors' behaviour).

    Args:
        all_layer_embedding: ``(batch, layers, tokens, hidden)``, layer 0 = embedding output.
        masks: ``(batch, tokens)`` 1 for real tokens (right padding), 0 for padding.
        layer_start: first layer used (index into the stacked layers).
        window: context half-width m over neighbouring layers.

    Returns:
        ``(batch, hidden)`` float64 sentence vectors.

    The first ``sum(mask) - 1`` positions of each sentence are used: [CLS] kept, the final [SEP]
    dropped - again exactly as the authors' code, not as the paper describes.
    """
    states = np.asarray(all_layer_embedding)[:, layer_start:]
    n_tokens = np.asarray(masks).sum(axis=1).astype(int) - 1
    out = []
    for b in range(states.shape[0]):
        sentence = states[b, :, : n_tokens[b], :]  # (layers, tokens, hidden)
        tokens = np.array([_unify_token(sentence[:, t, :], window) for t in range(n_tokens[b])])
        variance = np.array([_token_variance(sentence[:, t, :]) for t in range(n_tokens[b])])
        weights = variance / variance.sum()
        out.append(tokens.T.dot(weights))
    return np.array(out)
