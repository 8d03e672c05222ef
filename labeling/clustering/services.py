"""The signals clustering reads, their vectors, and new items sorted into the nearest open category."""

from collections import Counter

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Count, F
from django.utils import timezone

from feedback.models import Embedding, FeedbackItem
from feedback.text import EMBED_RECIPE
from labeling.audit import audit_record
from labeling.clustering.algorithm import DIMENSIONS, assign_to_nearest
from labeling.models import Area, Assignment, Category, ClusterRun


def failure_signals():
    """The signals that describe failures: thumbs-down ratings and reports."""
    return FeedbackItem.objects.failures()


def clusterable_failures():
    """Failure signals with a vector made by the current text recipe: what a run clusters.

    A bare thumbs-down is included: its text is the evidence of its run (a
    tool error, the end of the output, the request). Vectors of an older
    recipe wait for re-embedding, so one run never mixes two recipes.
    """
    return failure_signals().filter(embedding__isnull=False, embed_recipe=EMBED_RECIPE)


def vectors_for(embedding_ids: list[int]) -> np.ndarray:
    """Vectors in the order of the ids given (ids may repeat)."""
    if not embedding_ids:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    unique_ids = sorted(set(embedding_ids))
    row_of = {embedding_id: row for row, embedding_id in enumerate(unique_ids)}
    matrix = np.empty((len(unique_ids), DIMENSIONS), dtype=np.float32)
    for start in range(0, len(unique_ids), 5000):
        chunk = unique_ids[start : start + 5000]
        for embedding_id, vector in Embedding.objects.filter(id__in=chunk).values_list("id", "vector"):
            matrix[row_of[embedding_id]] = np.frombuffer(vector, dtype=np.float32)
    return matrix[[row_of[embedding_id] for embedding_id in embedding_ids]]


def centroid_of(category: Category) -> np.ndarray | None:
    return None if category.centroid is None else np.frombuffer(category.centroid, dtype=np.float32)


def items_set_status(*, item_ids: list[int], status: str, now) -> None:
    for chunk in id_chunks(item_ids):
        FeedbackItem.objects.filter(id__in=chunk).exclude(status=status).update(status=status, status_changed_at=now)


def categories_refresh_sizes(*, run: ClusterRun | None = None) -> None:
    """Store each category's item count; a cluster run's changes go on the categories' history.

    The run records "resized" for a changed count and "retired" for a
    category it left empty; its page lists these with what it created and renamed.
    """
    sizes = dict(
        Assignment.objects.exclude(category=None).values_list("category").annotate(n=Count("id")).values_list(
            "category", "n"
        )
    )
    for category in Category.objects.only("id", "size", "created_by_run_id"):
        size = sizes.get(category.id, 0)
        if category.size != size:
            if run is not None and category.created_by_run_id != run.id:  # a new category's size is no change
                # A category left with no items is retired from the lists, not deleted: its history stays.
                verb = "retired" if size == 0 else "resized"
                run_audit(run, category, verb, "items", category.size, size)
            category.size = size
            category.save(update_fields=["size"])


def items_assign(*, item_ids: list[int]) -> int:
    """Sort newly embedded failure signals into the nearest open category, or their area's unsorted bucket.

    An item joins its nearest category when the cosine reaches the lower of
    `ASSIGN_SIMILARITY_THRESHOLD` and the category's own loosest members'
    (so categories of long texts, whose cosines are all lower, still take
    new signals); otherwise it waits unsorted in the nearest area for the
    next run. Items a reviewer placed are left alone. Returns how many got a category.
    """
    rows = list(
        failure_signals()
        .filter(id__in=item_ids, status=FeedbackItem.Status.EMBEDDED, embedding__isnull=False)
        .exclude(assignment__assigned_by=Assignment.By.REVIEWER)
        .values_list("id", "embedding_id")
    )
    with transaction.atomic():
        assignments = _assign_nearest(rows=rows)
        placed = [a for a in assignments if a.category_id]
        for category_id, added in Counter(a.category_id for a in placed).items():
            Category.objects.filter(id=category_id).update(size=F("size") + added)
    return len(placed)


def _assign_nearest(*, rows: list[tuple[int, int]]) -> list[Assignment]:
    """Give each (item id, embedding id) the nearest open category it fits, else the nearest area only."""
    categories = list(
        Category.objects.open()
        .exclude(centroid=None)
        .only("id", "centroid", "fit_similarity", "area_id")
    )
    if not rows or not categories:
        return []
    centroids = np.vstack([centroid_of(c) for c in categories])
    vectors = vectors_for([embedding_id for _, embedding_id in rows])
    nearest, similarity = assign_to_nearest(vectors, centroids, threshold=-1.0)
    floors = np.array(
        [min(settings.ASSIGN_SIMILARITY_THRESHOLD, c.fit_similarity or settings.ASSIGN_SIMILARITY_THRESHOLD) for c in categories]
    )
    areas = list(Area.objects.open().exclude(centroid=None).only("id", "centroid"))
    nearest_area = (
        assign_to_nearest(vectors, np.vstack([centroid_of(a) for a in areas]), threshold=-1.0)[0]
        if areas
        else np.full(len(rows), -1)
    )
    now = timezone.now()
    assignments = []
    for (item_id, _), index, sim, area_index in zip(rows, nearest.tolist(), similarity.tolist(), nearest_area.tolist()):
        fits = sim >= floors[index]
        category = categories[index] if fits else None
        assignments.append(
            Assignment(
                item_id=item_id,
                category_id=category.id if category else None,
                area_id=category.area_id if category else (areas[area_index].id if area_index >= 0 else None),
                confidence=float(sim) if category else None,
                assigned_by=Assignment.By.MODEL,
                run=None,
                updated_at=now,
            )
        )
    assignments_upsert(assignments)
    items_set_status(item_ids=[a.item_id for a in assignments if a.category_id], status=FeedbackItem.Status.ASSIGNED, now=now)
    items_set_status(item_ids=[a.item_id for a in assignments if not a.category_id], status=FeedbackItem.Status.EMBEDDED, now=now)
    return assignments


def id_chunks(ids: list[int], size: int = 10_000):
    # SQLite caps the number of parameters in one statement.
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def run_audit(run: ClusterRun, category: Category, verb: str, field: str, before, after) -> None:
    audit_record(
        actor=None,
        action=f"{verb} by cluster run #{run.id}",
        category=category,
        details={field: {"before": before, "after": after}},
    )


def assignments_upsert(assignments: list[Assignment]) -> None:
    """Write the model's assignments, one row per item: a new row, or the item's row replaced."""
    Assignment.objects.bulk_create(
        assignments,
        batch_size=1000,
        update_conflicts=True,
        unique_fields=["item"],
        update_fields=["category", "area", "confidence", "assigned_by", "run", "updated_at"],
    )
