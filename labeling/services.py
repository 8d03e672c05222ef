"""Writes for the labeling app: cluster runs, categories and assignments."""

import logging
from collections import Counter
from dataclasses import asdict
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from feedback.models import Embedding, FeedbackItem
from labeling import clustering
from labeling.audit import audit_record
from labeling.models import Assignment, Category, ClusterRun

logger = logging.getLogger(__name__)

# Categories that new signals may be sorted into.
OPEN_STATUSES = (Category.Status.PROPOSED, Category.Status.CONFIRMED)


class RunAlreadyActive(Exception):
    def __init__(self, run: ClusterRun) -> None:
        super().__init__(f"cluster run {run.id} is still {run.status}")
        self.run = run


def failure_signals():
    """The signals that describe failures: thumbs-down ratings and reports."""
    return FeedbackItem.objects.filter(Q(kind=FeedbackItem.Kind.REPORT) | Q(rating=-1))


def described_failures():
    """Failure signals that say in words what went wrong: what clustering learns from.

    A bare thumbs-down is embedded by the request it rated, which tells the
    topic of the task rather than the failure; such items are sorted into a
    category on arrival only when they are close enough to one.
    """
    return failure_signals().exclude(kind=FeedbackItem.Kind.RATING, comment="")


def vectors_for(embedding_ids: list[int]) -> np.ndarray:
    """Vectors in the order of the ids given (ids may repeat)."""
    if not embedding_ids:
        return np.zeros((0, clustering.DIMENSIONS), dtype=np.float32)
    unique_ids = sorted(set(embedding_ids))
    row_of = {embedding_id: row for row, embedding_id in enumerate(unique_ids)}
    matrix = np.empty((len(unique_ids), clustering.DIMENSIONS), dtype=np.float32)
    for start in range(0, len(unique_ids), 5000):
        chunk = unique_ids[start : start + 5000]
        for embedding_id, vector in Embedding.objects.filter(id__in=chunk).values_list("id", "vector"):
            matrix[row_of[embedding_id]] = np.frombuffer(vector, dtype=np.float32)
    return matrix[[row_of[embedding_id] for embedding_id in embedding_ids]]


def centroid_of(category: Category) -> np.ndarray | None:
    return None if category.centroid is None else np.frombuffer(category.centroid, dtype=np.float32)


# --- Cluster runs -------------------------------------------------------------------


def cluster_runs_reset_stuck(*, now=None) -> int:
    """Fail runs whose worker stopped beating, so a new run can start."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.CLUSTER_RUN_STUCK_SECONDS)
    stuck = ClusterRun.objects.filter(active=True).filter(
        Q(status=ClusterRun.Status.RUNNING, heartbeat_at__lt=stale)
        | Q(status=ClusterRun.Status.QUEUED, created_at__lt=stale)
    )
    return stuck.update(
        status=ClusterRun.Status.FAILED, active=None, finished_at=now, error="stopped: no progress from its worker"
    )


def cluster_run_start(*, trigger: str, user=None, enqueue: bool = True) -> ClusterRun:
    """Create a queued run and queue it after commit; RunAlreadyActive if one is going.

    With ``enqueue=False`` the caller executes the run itself.
    """
    from labeling.tasks import run_clustering  # tasks import services

    cluster_runs_reset_stuck()
    try:
        with transaction.atomic():
            run = ClusterRun.objects.create(trigger=trigger, started_by=user, params=asdict(cluster_params()))
    except IntegrityError:
        raise RunAlreadyActive(ClusterRun.objects.get(active=True)) from None
    if enqueue:
        transaction.on_commit(lambda: run_clustering.delay(run.id))
    return run


def cluster_params() -> clustering.ClusterParams:
    """The clustering parameters a new run uses: the defaults with the CLUSTER_* settings applied."""
    return clustering.ClusterParams(
        merge_threshold=settings.CLUSTER_MERGE_THRESHOLD,
        merge_min_items=settings.CLUSTER_MERGE_MIN_ITEMS,
        min_cluster_size=settings.CLUSTER_MIN_CLUSTER_SIZE,
    )


def _run_update(run: ClusterRun, **fields) -> None:
    fields["heartbeat_at"] = timezone.now()
    for name, value in fields.items():
        setattr(run, name, value)
    run.save(update_fields=list(fields))


def cluster_run_execute(*, run_id: int) -> ClusterRun | None:
    """Cluster every failure signal and reconcile the result with the categories.

    Steps: claim the queued run (stop quietly if it is gone or taken); load
    the vectors; cluster; name the clusters; match them one-to-one to the
    existing categories so ids, reviewer names and statuses survive; write
    the model's assignments (never a reviewer's); record counts.
    """
    claimed = ClusterRun.objects.filter(id=run_id, status=ClusterRun.Status.QUEUED).update(
        status=ClusterRun.Status.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now()
    )
    if not claimed:
        return None
    run = ClusterRun.objects.get(id=run_id)
    try:
        _cluster_run_body(run)
    except Exception as exc:
        logger.exception("cluster run %s failed", run_id)
        _run_update(
            run,
            status=ClusterRun.Status.FAILED,
            active=None,
            finished_at=timezone.now(),
            error=f"{type(exc).__name__}: {exc}"[:2000],
        )
        raise
    return run


def _cluster_run_body(run: ClusterRun) -> None:
    _run_update(run, stage="loading vectors", progress=0.02)
    rows = list(
        described_failures()
        .filter(embedding__isnull=False)
        .order_by("id")
        .values_list("id", "embedding_id", "embed_text")
    )
    item_ids = [row[0] for row in rows]
    vectors = vectors_for([row[1] for row in rows])
    texts = [row[2] for row in rows]

    def progress(share: float) -> None:
        _run_update(run, stage="clustering", progress=0.05 + 0.6 * share)

    params = clustering.ClusterParams(**run.params) if run.params else clustering.ClusterParams()
    if len(rows) >= params.min_items:
        result = clustering.cluster_vectors(vectors, params=params, progress=progress)
        labels, centroids, similarity = result.labels, result.centroids, result.similarity
    else:
        labels = np.full(len(rows), -1)
        centroids = np.zeros((0, clustering.DIMENSIONS), dtype=np.float32)
        similarity = np.zeros(len(rows), dtype=np.float32)

    _run_update(run, stage="naming categories", progress=0.7)
    keywords = clustering.describe_clusters(texts, labels) if len(centroids) else {}
    representatives = clustering.representatives(vectors, labels, centroids) if len(centroids) else {}

    _run_update(run, stage="matching categories", progress=0.8)
    with transaction.atomic():
        category_of_cluster, matched, created = _reconcile_categories(
            run, centroids, keywords, representatives, item_ids
        )
        _run_update(run, stage="assigning items", progress=0.9)
        assigned = _write_model_assignments(run, item_ids, labels, similarity, category_of_cluster)
        assigned_by_context = _assign_undescribed(run=run)
        categories_refresh_sizes(run=run)

    _run_update(
        run,
        status=ClusterRun.Status.DONE,
        active=None,
        stage="done",
        progress=1.0,
        finished_at=timezone.now(),
        counts={
            "items": len(rows),
            "clusters": int(len(centroids)),
            "matched": matched,
            "new": created,
            "assigned": assigned,
            "unassigned": len(rows) - assigned,
            "assigned_by_context": assigned_by_context,
        },
        quality={
            "mean_similarity": round(float(similarity[labels >= 0].mean()), 4) if (labels >= 0).any() else None,
            "unassigned_share": round(float((labels < 0).mean()), 4) if len(labels) else None,
        },
    )


def _final_category(category: Category) -> Category:
    """Follow merges to the category that absorbed this one."""
    seen = set()
    while category.status == Category.Status.MERGED and category.merged_into_id and category.id not in seen:
        seen.add(category.id)
        category = category.merged_into
    return category


def _reconcile_categories(run, centroids, keywords, representatives, item_ids):
    """Map each new cluster to a category: an existing one it matches, or a new proposed one."""
    # Locked: a reviewer's rename, merge or archive waits for the run, and the
    # run sees the reviewer's latest decision, never overwriting it.
    existing = list(
        Category.objects.select_for_update(of=("self",)).select_related("merged_into").exclude(centroid=None)
    )
    existing_centroids = (
        np.vstack([centroid_of(c) for c in existing]) if existing else np.zeros((0, clustering.DIMENSIONS))
    )
    matches = clustering.match_clusters(
        centroids, existing_centroids, min_similarity=settings.CATEGORY_MATCH_SIMILARITY
    )
    now = timezone.now()
    category_of_cluster: dict[int, Category | None] = {}
    matched = created = 0
    for cluster in range(len(centroids)):
        words = keywords.get(cluster, [])
        reps = [item_ids[i] for i in representatives.get(cluster, [])]
        if cluster in matches:
            category = _final_category(existing[matches[cluster]])
            matched += 1
            if category.status == Category.Status.ARCHIVED:
                # A reviewer archived this failure: its items stay unassigned.
                category_of_cluster[cluster] = None
                continue
            category.keywords = words
            category.representative_ids = reps
            category.last_run = run
            category.updated_at = now
            if category.id == existing[matches[cluster]].id:
                category.centroid = centroids[cluster].astype(np.float32).tobytes()
            if not category.named_by_reviewer:
                name = clustering.name_from_keywords(words)
                if name != category.name:
                    # On the category's history, like a reviewer's rename: a name people know changed.
                    _run_audit(run, category, "renamed", "name", category.name, name)
                category.name = name
                category.description = describe(words)
            category.save(
                update_fields=["keywords", "representative_ids", "last_run", "updated_at", "centroid", "name", "description"]
            )
        else:
            category = Category.objects.create(
                name=clustering.name_from_keywords(words),
                description=describe(words),
                keywords=words,
                representative_ids=reps,
                centroid=centroids[cluster].astype(np.float32).tobytes(),
                created_by_run=run,
                last_run=run,
            )
            created += 1
        category_of_cluster[cluster] = category
    return category_of_cluster, matched, created


def _run_audit(run: ClusterRun, category: Category, verb: str, field: str, before, after) -> None:
    audit_record(
        actor=None,
        action=f"{verb} by cluster run #{run.id}",
        category=category,
        details={field: {"before": before, "after": after}},
    )


def describe(keywords: list[str]) -> str:
    if not keywords:
        return ""
    return "Signals that mention " + ", ".join(keywords[:5]) + "."


def _write_model_assignments(run, item_ids, labels, similarity, category_of_cluster) -> int:
    """Replace the model's assignments of the clustered items; reviewer ones stay."""
    reviewed = set(Assignment.objects.filter(assigned_by=Assignment.By.REVIEWER).values_list("item_id", flat=True))
    now = timezone.now()
    rows = []
    assigned_ids, unassigned_ids = [], []
    for item_id, label, sim in zip(item_ids, labels.tolist(), similarity.tolist()):
        if item_id in reviewed:
            continue
        category = category_of_cluster.get(label) if label >= 0 else None
        rows.append(
            Assignment(
                item_id=item_id,
                category=category,
                confidence=float(sim) if category else None,
                assigned_by=Assignment.By.MODEL,
                run=run,
                updated_at=now,
            )
        )
        (assigned_ids if category else unassigned_ids).append(item_id)
    Assignment.objects.bulk_create(
        rows,
        batch_size=1000,
        update_conflicts=True,
        unique_fields=["item"],
        update_fields=["category", "confidence", "assigned_by", "run", "updated_at"],
    )
    items_set_status(item_ids=assigned_ids, status=FeedbackItem.Status.ASSIGNED, now=now)
    items_set_status(item_ids=unassigned_ids, status=FeedbackItem.Status.EMBEDDED, now=now)
    return len(assigned_ids) + len(reviewed)


def _chunks(ids: list[int], size: int = 10_000):
    # SQLite caps the number of parameters in one statement.
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def items_set_status(*, item_ids: list[int], status: str, now) -> None:
    for chunk in _chunks(item_ids):
        FeedbackItem.objects.filter(id__in=chunk).exclude(status=status).update(status=status, status_changed_at=now)


def categories_refresh_sizes(*, run: ClusterRun | None = None) -> None:
    """Store each category's item count; a cluster run's changes go on the categories' history."""
    sizes = dict(
        Assignment.objects.exclude(category=None).values_list("category").annotate(n=Count("id")).values_list(
            "category", "n"
        )
    )
    for category in Category.objects.only("id", "size", "created_by_run_id"):
        size = sizes.get(category.id, 0)
        if category.size != size:
            if run is not None and category.created_by_run_id != run.id:  # a new category's size is no change
                _run_audit(run, category, "resized", "items", category.size, size)
            category.size = size
            category.save(update_fields=["size"])


# --- Assignment as signals arrive --------------------------------------------------------


def items_assign(*, item_ids: list[int]) -> int:
    """Sort newly embedded failure signals into the nearest open category.

    An item is assigned only when its similarity passes the threshold; the
    others wait, unassigned, for the next run. Items a reviewer placed are
    left alone. Returns how many were assigned.
    """
    rows = list(
        failure_signals()
        .filter(id__in=item_ids, status=FeedbackItem.Status.EMBEDDED, embedding__isnull=False)
        .exclude(assignment__assigned_by=Assignment.By.REVIEWER)
        .values_list("id", "embedding_id")
    )
    with transaction.atomic():
        assignments = _assign_nearest(rows=rows, run=None)
        for category_id, added in Counter(a.category_id for a in assignments).items():
            Category.objects.filter(id=category_id).update(size=F("size") + added)
    return len(assignments)


def _assign_undescribed(*, run: ClusterRun) -> int:
    """After a run, sort the failure signals it did not cluster (bare thumbs-downs) anew."""
    rows = list(
        failure_signals()
        .filter(embedding__isnull=False)
        .exclude(id__in=described_failures().values("id"))
        .exclude(assignment__assigned_by=Assignment.By.REVIEWER)
        .values_list("id", "embedding_id")
    )
    return len(_assign_nearest(rows=rows, run=run))


def _assign_nearest(*, rows: list[tuple[int, int]], run: ClusterRun | None) -> list[Assignment]:
    """Give each (item id, embedding id) the nearest open category above the threshold.

    Items that fit none lose a model assignment they had, so they show as
    unassigned instead of keeping a stale category. Returns the assignments made.
    """
    categories = list(Category.objects.filter(status__in=OPEN_STATUSES).exclude(centroid=None).only("id", "centroid"))
    if not rows or not categories:
        return []
    centroids = np.vstack([centroid_of(c) for c in categories])
    vectors = vectors_for([embedding_id for _, embedding_id in rows])
    nearest, similarity = clustering.assign_to_nearest(
        vectors, centroids, threshold=settings.ASSIGN_SIMILARITY_THRESHOLD
    )
    now = timezone.now()
    assignments, unassigned_ids = [], []
    for (item_id, _), index, sim in zip(rows, nearest.tolist(), similarity.tolist()):
        if index < 0:
            unassigned_ids.append(item_id)
            continue
        assignments.append(
            Assignment(
                item_id=item_id,
                category_id=categories[index].id,
                confidence=float(sim),
                assigned_by=Assignment.By.MODEL,
                run=run,
                updated_at=now,
            )
        )
    Assignment.objects.bulk_create(
        assignments,
        batch_size=1000,
        update_conflicts=True,
        unique_fields=["item"],
        update_fields=["category", "confidence", "assigned_by", "run", "updated_at"],
    )
    for chunk in _chunks(unassigned_ids):
        Assignment.objects.filter(item_id__in=chunk, assigned_by=Assignment.By.MODEL).delete()
    items_set_status(item_ids=[a.item_id for a in assignments], status=FeedbackItem.Status.ASSIGNED, now=now)
    items_set_status(item_ids=unassigned_ids, status=FeedbackItem.Status.EMBEDDED, now=now)
    return assignments
