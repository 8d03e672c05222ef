"""An in-process exact nearest-neighbour index over the stored embeddings.

Vectors are immutable and only ever added, so the index loads them once and
then reads only what is new: embeddings with a higher id, and items whose
pipeline state changed since the last look. A query is one matrix-vector
product over the distinct texts (100,000 x 384 float32 is about 10 ms on two
cores), which is exact and needs no extra service.
"""

import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.db.models import Max

from feedback.models import Embedding, FeedbackItem

DIMENSIONS = 384


@dataclass
class Neighbour:
    item_id: int
    similarity: float


class VectorIndex:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._matrix = np.zeros((0, DIMENSIONS), dtype=np.float32)
        self._embedding_ids = np.zeros(0, dtype=np.int64)
        self._row_of_embedding: dict[int, int] = {}
        self._items_by_row: dict[int, set[int]] = {}
        self._row_of_item: dict[int, int] = {}
        self._last_embedding_id = 0
        self._items_seen_until: datetime | None = None
        self._refreshed_at = float("-inf")

    def refresh(self, *, max_age_seconds: float = 0.0) -> None:
        """Read what is new; skipped when the last look is younger than max_age_seconds."""
        with self._lock:
            if time.monotonic() - self._refreshed_at < max_age_seconds:
                return
            self._load_new_embeddings()
            self._load_changed_items()
            self._refreshed_at = time.monotonic()

    def _load_new_embeddings(self) -> None:
        rows = list(
            Embedding.objects.filter(id__gt=self._last_embedding_id).order_by("id").values_list("id", "vector")
        )
        if not rows:
            return
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        vectors = np.frombuffer(b"".join(bytes(row[1]) for row in rows), dtype=np.float32).reshape(-1, DIMENSIONS)
        start = len(self._embedding_ids)
        self._matrix = np.vstack([self._matrix, vectors])
        self._embedding_ids = np.concatenate([self._embedding_ids, ids])
        for offset, embedding_id in enumerate(ids.tolist()):
            self._row_of_embedding[embedding_id] = start + offset
        self._last_embedding_id = int(ids[-1])

    def _load_changed_items(self) -> None:
        items = FeedbackItem.objects.filter(embedding__isnull=False)
        if self._items_seen_until is not None:
            items = items.filter(status_changed_at__gte=self._items_seen_until)
        seen_until = FeedbackItem.objects.aggregate(latest=Max("status_changed_at"))["latest"]
        for item_id, embedding_id in items.values_list("id", "embedding_id").iterator(chunk_size=10_000):
            row = self._row_of_embedding.get(embedding_id)
            if row is None:
                continue
            old_row = self._row_of_item.get(item_id)
            if old_row is not None:
                self._items_by_row[old_row].discard(item_id)
            self._row_of_item[item_id] = row
            self._items_by_row.setdefault(row, set()).add(item_id)
        if seen_until is not None:
            self._items_seen_until = seen_until

    def vector_of_item(self, item_id: int) -> np.ndarray | None:
        row = self._row_of_item.get(item_id)
        return None if row is None else self._matrix[row]

    def search(self, query: np.ndarray, *, k: int, exclude_item: int | None = None) -> list[Neighbour]:
        """The k items most similar to a normalised query vector, best first."""
        if not len(self._matrix) or k <= 0:
            return []
        similarities = self._matrix @ query.astype(np.float32)
        # Rows can hold several items (equal texts) or none (no item yet):
        # take enough rows to fill k, then expand them to items.
        take = min(len(similarities), k + 16)
        rows = np.argpartition(-similarities, take - 1)[:take]
        rows = rows[np.argsort(-similarities[rows], kind="stable")]
        found: list[Neighbour] = []
        for row in rows.tolist():
            for item_id in sorted(self._items_by_row.get(row, ())):
                if item_id != exclude_item:
                    found.append(Neighbour(item_id, float(similarities[row])))
            if len(found) >= k:
                break
        return found[:k]

    def similarities(self, query: np.ndarray) -> np.ndarray:
        """The cosine of every row to a normalised query vector: one matrix-vector product."""
        return self._matrix @ query.astype(np.float32)

    def nearest_in_rounds(
        self, similarities: np.ndarray, *, sizes: tuple[int, ...], exclude_item: int | None = None
    ) -> Iterator[list[Neighbour]]:
        """The nearest items in widening rounds: each round yields the items its
        larger cut adds (about `size` items in all), best first.

        A caller that filters the items stops as soon as enough passed,
        so a filter most items meet costs one small round, and the product is
        computed once for all rounds.
        """
        taken = 0
        # Rows already yielded: with equal similarities at a cut, two cuts
        # need not agree on which of them fell inside.
        yielded = np.zeros(len(similarities), dtype=bool)
        for size in sizes:
            if taken >= len(similarities):
                return
            # Rows hold several items (equal texts) or none: a few more rows
            # than items wanted, as in `search`.
            take = min(len(similarities), size + 16)
            rows = np.argpartition(-similarities, take - 1)[:take] if take < len(similarities) else np.arange(take)
            rows = rows[~yielded[rows]]
            rows = rows[np.argsort(-similarities[rows], kind="stable")]
            yielded[rows] = True
            taken = take
            found = [
                Neighbour(item_id, float(similarities[row]))
                for row in rows.tolist()
                for item_id in sorted(self._items_by_row.get(row, ()))
                if item_id != exclude_item
            ]
            yield found

    def nearest_among(
        self, similarities: np.ndarray, *, item_ids: Iterable[int], k: int, exclude_item: int | None = None
    ) -> list[Neighbour]:
        """The k of the given items nearest to the query the similarities came from, best first.

        For a selective filter: the items that pass it are few, and scoring
        only them is cheaper than widening the rounds until enough pass.
        """
        row_of_item = self._row_of_item
        pairs = [(item_id, row_of_item.get(item_id)) for item_id in item_ids if item_id != exclude_item]
        # A refresh since the product may have added rows it does not cover.
        pairs = [(item_id, row) for item_id, row in pairs if row is not None and row < len(similarities)]
        if not pairs or k <= 0:
            return []
        ids = np.fromiter((item_id for item_id, _ in pairs), dtype=np.int64, count=len(pairs))
        scores = similarities[np.fromiter((row for _, row in pairs), dtype=np.int64, count=len(pairs))]
        if len(scores) > k:
            keep = np.argpartition(-scores, k - 1)[:k]
            ids, scores = ids[keep], scores[keep]
        # Best first; equal similarity (equal texts) by id, as `search` orders them.
        order = np.lexsort((ids, -scores))
        return [Neighbour(int(ids[i]), float(scores[i])) for i in order.tolist()]


_index = VectorIndex()


# Lookups may trail the database by this much; it spares a refresh per query.
REFRESH_SECONDS = 1.0


def shared_index() -> VectorIndex:
    """The process-wide index, at most REFRESH_SECONDS behind the database."""
    _index.refresh(max_age_seconds=REFRESH_SECONDS)
    return _index


def reset_shared_index() -> None:
    """Forget everything loaded (tests: each starts from its own database)."""
    global _index
    _index = VectorIndex()
