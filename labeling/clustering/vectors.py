"""Row-wise helpers on unit vectors: normalising, centroids, nearest centroid, relabelling."""

from __future__ import annotations

import numpy as np


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """float32 rows of length 1 (zero rows stay zero)."""
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"expected a 2-d array of vectors, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def compact_labels(labels: np.ndarray) -> np.ndarray:
    """Renumber labels 0..k-1 in order of first appearance; -1 stays -1."""
    labels = np.asarray(labels, dtype=np.int64)
    out = np.full(len(labels), -1, dtype=np.int64)
    assigned = labels >= 0
    _, first, inverse = np.unique(labels[assigned], return_index=True, return_inverse=True)
    # Order of first appearance, not of old label value: deterministic and
    # independent of how earlier steps happened to number things.
    rank = np.argsort(np.argsort(first, kind="stable"), kind="stable")
    out[assigned] = rank[inverse]
    return out


def centroids_of(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """L2-normalised mean per label 0..max(labels); -1 items ignored."""
    k = int(labels.max()) + 1 if len(labels) else 0
    return unit_rows(label_sums(x, labels, k))


def label_sums(x: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """float64 sum of the rows per label 0..k-1; -1 rows ignored.

    A sparse one-hot product: np.add.at does the same but is far slower on
    100,000 x 384 (seconds per call rather than milliseconds).
    """
    from scipy.sparse import csr_matrix

    assigned = np.flatnonzero(labels >= 0)
    one_hot = csr_matrix(
        (np.ones(len(assigned)), (labels[assigned], assigned)), shape=(k, len(x))
    )
    return np.asarray(one_hot @ x.astype(np.float64))


def nearest_centroid(x: np.ndarray, centroids: np.ndarray, chunk: int = 16_384) -> tuple[np.ndarray, np.ndarray]:
    """Most similar centroid per row and the cosine, in chunks to bound memory."""
    index = np.empty(len(x), dtype=np.int64)
    similarity = np.empty(len(x), dtype=np.float32)
    c = centroids.astype(np.float32)
    for start in range(0, len(x), chunk):
        s = x[start : start + chunk] @ c.T
        best = np.argmax(s, axis=1)
        index[start : start + chunk] = best
        similarity[start : start + chunk] = s[np.arange(len(best)), best]
    return index, similarity
