"""The held-out promise: nothing in an eval set, and nothing nearly identical to it, reaches a train export.

A train export drops, in this order of reasons:

- an item that is a member of any eval version (`in_eval_version`);
- an item whose latest label says its intended split is eval (`marked_eval`);
- an item whose normalised text (casefolded, punctuation removed, whitespace
  collapsed) equals an eval item's (`duplicate_of_eval_text`);
- an item with words but no vector yet, while eval vectors exist: it cannot
  be checked, so it waits for a later version (`not_embedded`);
- an item whose vector is within `HOLDOUT_SIMILARITY` cosine (default 0.92)
  of an eval item's vector (`near_duplicate_of_eval`).

An eval export drops items already in a train version (`in_train_version`)
and deduplicates itself the same way: the lowest item id of a group of
equal or near-equal texts stays (`duplicate_text_within_eval`,
`near_duplicate_within_eval`).

The text is the one the similarity index embeds (feedback.services.embed_text_for),
so both rules judge the same words.
"""

import hashlib
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from exports.records import ExportRecord
from feedback.models import Embedding
from feedback.services import embed_text_for

DIMENSIONS = 384
DEFAULT_SIMILARITY = 0.92

IN_EVAL_VERSION = "in_eval_version"
MARKED_EVAL = "marked_eval"
DUPLICATE_OF_EVAL_TEXT = "duplicate_of_eval_text"
NOT_EMBEDDED = "not_embedded"
NEAR_DUPLICATE_OF_EVAL = "near_duplicate_of_eval"
IN_TRAIN_VERSION = "in_train_version"
DUPLICATE_TEXT_WITHIN_EVAL = "duplicate_text_within_eval"
NEAR_DUPLICATE_WITHIN_EVAL = "near_duplicate_within_eval"

REASONS = {
    IN_EVAL_VERSION: "is in an eval dataset version",
    MARKED_EVAL: "a reviewer marked it for the eval split",
    DUPLICATE_OF_EVAL_TEXT: "same text as an eval item (after normalising)",
    NOT_EMBEDDED: "has no vector yet, so it cannot be checked against the eval items",
    NEAR_DUPLICATE_OF_EVAL: "nearly the same text as an eval item (cosine at or above the threshold)",
    IN_TRAIN_VERSION: "is in a train dataset version",
    DUPLICATE_TEXT_WITHIN_EVAL: "same text as another item of this eval set",
    NEAR_DUPLICATE_WITHIN_EVAL: "nearly the same text as another item of this eval set",
}

# Every punctuation character Unicode knows, mapped to nothing.
_PUNCTUATION = {code: None for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)).startswith("P")}


def similarity_threshold() -> float:
    threshold = float(getattr(settings, "HOLDOUT_SIMILARITY", DEFAULT_SIMILARITY))
    if not 0.0 < threshold <= 1.0:
        # Above 1 nothing is ever held out; at 0 or below, everything is.
        raise ImproperlyConfigured(f"HOLDOUT_SIMILARITY must be in (0, 1], got {threshold}")
    return threshold


def text_normalise(text: str) -> str:
    """Casefold, strip punctuation, collapse whitespace: "The  agent EDITED it!" -> "the agent edited it"."""
    return " ".join(text.casefold().translate(_PUNCTUATION).split())


def text_key(text: str) -> bytes | None:
    """A compact fingerprint of the normalised text; None for a text with no words."""
    normalised = text_normalise(text)
    if not normalised:
        return None
    return hashlib.blake2b(normalised.encode(), digest_size=16).digest()


class VectorSet:
    """A growing matrix of L2-normalised vectors that answers "how close is the nearest?"."""

    def __init__(self) -> None:
        self._matrix = np.empty((1024, DIMENSIONS), dtype=np.float32)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, DIMENSIONS)
        needed = self._size + len(vectors)
        if needed > len(self._matrix):
            grown = np.empty((max(needed, 2 * len(self._matrix)), DIMENSIONS), dtype=np.float32)
            grown[: self._size] = self._matrix[: self._size]
            self._matrix = grown
        self._matrix[self._size : needed] = vectors
        self._size = needed

    def max_similarity(self, queries: np.ndarray, *, block: int = 8192) -> np.ndarray:
        """For each query row, the highest cosine to any stored vector (-1 when empty)."""
        best = np.full(len(queries), -1.0, dtype=np.float32)
        # In blocks, so 2,000 queries against 100,000 vectors never build one 800 MB matrix.
        for start in range(0, self._size, block):
            similarities = queries @ self._matrix[start : min(start + block, self._size)].T
            np.maximum(best, similarities.max(axis=1), out=best)
        return best


def _vectors_of(records: list[ExportRecord]) -> np.ndarray:
    return np.vstack([record.vector for record in records]) if records else np.zeros((0, DIMENSIONS), np.float32)


class TrainGuard:
    """Keeps eval items and their near-duplicates out of a train export."""

    def __init__(self, *, eval_items: Iterable, threshold: float) -> None:
        self.threshold = threshold
        self.keys: set[bytes] = set()
        self.vectors = VectorSet()
        self.held = Counter()
        embedding_ids = set()
        self.eval_item_count = 0
        for item in eval_items:
            self.eval_item_count += 1
            key = text_key(item.embed_text or embed_text_for(item))
            if key is not None:
                self.keys.add(key)
            if item.embedding_id is not None:
                embedding_ids.add(item.embedding_id)
        ordered = sorted(embedding_ids)
        for start in range(0, len(ordered), 2000):
            rows = Embedding.objects.filter(id__in=ordered[start : start + 2000]).order_by("id")
            self.vectors.add(
                np.vstack([np.frombuffer(v, dtype=np.float32) for v in rows.values_list("vector", flat=True)])
            )

    def keep(self, records: list[ExportRecord]) -> list[ExportRecord]:
        """The records that may go into the train export; the others are counted in `held`."""
        if not self.keys and not len(self.vectors):
            # No eval items yet: only the reviewers' split marks can hold anything out.
            kept = [r for r in records if not r.in_opposite_purpose and r.split != "eval"]
            self.held[MARKED_EVAL] += len(records) - len(kept)
            return kept
        candidates = []
        for record in records:
            key = text_key(record.text)
            if record.in_opposite_purpose:
                self.held[IN_EVAL_VERSION] += 1
            elif record.split == "eval":
                self.held[MARKED_EVAL] += 1
            elif key is not None and key in self.keys:
                self.held[DUPLICATE_OF_EVAL_TEXT] += 1
            elif len(self.vectors) and record.vector is None and key is not None:
                self.held[NOT_EMBEDDED] += 1
            else:
                candidates.append(record)
        with_vectors = [record for record in candidates if record.vector is not None]
        if not len(self.vectors) or not with_vectors:
            return candidates
        nearest = self.vectors.max_similarity(_vectors_of(with_vectors))
        too_close = {record.id for record, sim in zip(with_vectors, nearest.tolist()) if sim >= self.threshold}
        self.held[NEAR_DUPLICATE_OF_EVAL] += len(too_close)
        return [record for record in candidates if record.id not in too_close]


class EvalDeduplicator:
    """Keeps the first of each group of equal or near-equal texts in an eval export."""

    def __init__(self, *, threshold: float) -> None:
        self.threshold = threshold
        self.keys: set[bytes] = set()
        self.vectors = VectorSet()
        self.held = Counter()
        self.eval_item_count = 0

    def keep(self, records: list[ExportRecord]) -> list[ExportRecord]:
        with_vectors = [record for record in records if record.vector is not None and not record.in_opposite_purpose]
        queries = _vectors_of(with_vectors)
        row_of = {record.id: row for row, record in enumerate(with_vectors)}
        earlier = self.vectors.max_similarity(queries) if len(self.vectors) else np.full(len(queries), -1.0)
        within = queries @ queries.T
        kept_rows: list[int] = []
        kept = []
        for record in records:
            if record.in_opposite_purpose:
                self.held[IN_TRAIN_VERSION] += 1
                continue
            key = text_key(record.text)
            if key is not None and key in self.keys:
                self.held[DUPLICATE_TEXT_WITHIN_EVAL] += 1
                continue
            row = row_of.get(record.id)
            if row is not None and (
                earlier[row] >= self.threshold or (kept_rows and within[row, kept_rows].max() >= self.threshold)
            ):
                self.held[NEAR_DUPLICATE_WITHIN_EVAL] += 1
                continue
            if key is not None:
                self.keys.add(key)
            if row is not None:
                kept_rows.append(row)
            kept.append(record)
        if kept_rows:
            self.vectors.add(queries[kept_rows])
        return kept


def held_out_summary(*, held: Counter, threshold: float, checked_against: dict) -> dict:
    return {
        "total": sum(held.values()),
        "reasons": {reason: held[reason] for reason in sorted(held) if held[reason]},
        "similarity_threshold": threshold,
        "checked_against": checked_against,
    }
