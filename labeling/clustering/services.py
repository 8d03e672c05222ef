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
from feedback.text import EMBED_RECIPE
from labeling.audit import audit_record
from labeling.clustering import algorithm as clustering
from labeling.models import Area, Assignment, Category, ClusterRun
from notifications import events as notification_events

logger = logging.getLogger(__name__)

class RunAlreadyActive(Exception):
    def __init__(self, run: ClusterRun) -> None:
        super().__init__(f"cluster run {run.id} is still {run.status}")
        self.run = run


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
    cluster_runs_reset_stuck()
    try:
        with transaction.atomic():
            run = ClusterRun.objects.create(trigger=trigger, started_by=user, params=asdict(cluster_params()))
    except IntegrityError:
        raise RunAlreadyActive(ClusterRun.objects.get(active=True)) from None
    if enqueue:
        transaction.on_commit(lambda: cluster_run_enqueue(run_id=run.id))
    return run


def cluster_run_enqueue(*, run_id: int) -> bool:
    """Hand the run to a worker; when the broker is unreachable the run fails at once with that reason."""
    from labeling.tasks import run_clustering  # tasks import services

    return ClusterRun.enqueue(run_clustering, run_id=run_id, then="start the run again later")


def cluster_params() -> clustering.ClusterParams:
    """The clustering parameters a new run uses: the defaults with the CLUSTER_* settings applied."""
    return clustering.ClusterParams(
        merge_threshold=settings.CLUSTER_MERGE_THRESHOLD,
        merge_min_items=settings.CLUSTER_MERGE_MIN_ITEMS,
        min_cluster_size=settings.CLUSTER_MIN_CLUSTER_SIZE,
    )


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
        run.update(
            status=ClusterRun.Status.FAILED,
            active=None,
            finished_at=timezone.now(),
            error=f"{type(exc).__name__}: {exc}"[:2000],
        )
        raise
    return run


# An earlier item stays in its category unless an existing category's
# centroid is more than this much more similar: runs over slightly
# different data keep what people have already seen.
STICKY_MARGIN = 0.15
REPRESENTATIVES = 5
# A new cluster continues an existing category (or area) when at least this
# share of its items were in it, and this share of those items came along.
OVERLAP_SHARE = 0.3


def _cluster_run_body(run: ClusterRun) -> None:
    run.update(stage="loading vectors", progress=0.02)
    rows = list(clusterable_failures().order_by("id").values_list("id", "embedding_id", "embed_text"))
    item_ids = [row[0] for row in rows]
    vectors = clustering._unit_rows(vectors_for([row[1] for row in rows]))
    texts = [row[2] for row in rows]

    def progress(share: float) -> None:
        run.update(stage="clustering", progress=0.05 + 0.6 * share)

    params = clustering.ClusterParams(**run.params) if run.params else clustering.ClusterParams()
    if len(rows) >= params.min_items:
        result = clustering.cluster_vectors(vectors, params=params, progress=progress)
    else:
        result = clustering.ClusterResult(
            labels=np.full(len(rows), -1, dtype=np.int64),
            centroids=np.zeros((0, clustering.DIMENSIONS), dtype=np.float32),
            sizes=np.zeros(0, dtype=np.int64),
            similarity=np.zeros(len(rows), dtype=np.float32),
        )

    run.update(stage="naming categories", progress=0.7)
    previous = dict(
        Assignment.objects.filter(item_id__in=item_ids).values_list("item_id", "category_id")
    ) if item_ids else {}
    previous_area = dict(
        Assignment.objects.filter(item_id__in=item_ids).values_list("item_id", "area_id")
    ) if item_ids else {}

    run.update(stage="matching categories", progress=0.8)
    with transaction.atomic():
        plan = _reconcile_categories(run, result, vectors, texts, item_ids, previous)
        run.update(stage="grouping areas", progress=0.85)
        area_of_item = _reconcile_areas(run, result, vectors, texts, item_ids, plan, previous_area)
        run.update(stage="assigning items", progress=0.9)
        assigned = _write_model_assignments(run, item_ids, plan, area_of_item)
        categories_refresh_sizes(run=run)

    labels = plan.labels
    run.update(
        status=ClusterRun.Status.DONE,
        active=None,
        stage="done",
        progress=1.0,
        finished_at=timezone.now(),
        counts={
            "items": len(rows),
            "clusters": int(result.n_clusters),
            "areas": int(result.n_areas),
            "matched": plan.matched,
            "new": plan.created,
            "assigned": assigned,
            "unassigned": len(rows) - assigned,
            "kept_by_stickiness": plan.kept,
        },
        quality={
            "mean_similarity": round(float(plan.similarity[labels >= 0].mean()), 4) if (labels >= 0).any() else None,
            "unassigned_share": round(float((labels < 0).mean()), 4) if len(labels) else None,
        },
    )
    notification_events.cluster_run_done(run_id=run.id)


class _Plan:
    """What a run decided per item: its category (or none) and how similar it is to it."""

    def __init__(self, categories: list[Category | None], labels, similarity, matched: int, created: int, kept: int):
        self.categories = categories  # per item: the Category, or None for unsorted
        self.labels = labels  # per item: cluster index, -1 unsorted
        self.similarity = similarity
        self.matched, self.created, self.kept = matched, created, kept


def _final(row):
    """Follow merges to the category (or area) that absorbed this one; a merge loop stops where it closes."""
    seen = set()
    while row.status == type(row).Status.MERGED and row.merged_into_id and row.id not in seen:
        seen.add(row.id)
        row = row.merged_into
    return row


def _overlap_matches(cluster_of_item: np.ndarray, previous_of_item: list[int | None], n_clusters: int) -> dict[int, int]:
    """One-to-one map of new cluster -> existing id, by the items they share.

    Hungarian matching on the shared item counts; a pair counts when the
    shared items are at least OVERLAP_SHARE of the cluster and of the
    existing group's items in this run.
    """
    from scipy.optimize import linear_sum_assignment

    known = sorted({p for p in previous_of_item if p is not None})
    if not known or not n_clusters:
        return {}
    column = {pid: j for j, pid in enumerate(known)}
    shared = np.zeros((n_clusters, len(known)))
    for cluster, pid in zip(cluster_of_item.tolist(), previous_of_item):
        if cluster >= 0 and pid is not None:
            shared[cluster, column[pid]] += 1
    cluster_size = np.bincount(cluster_of_item[cluster_of_item >= 0], minlength=n_clusters)[:, None]
    group_size = np.bincount([column[p] for p in previous_of_item if p is not None], minlength=len(known))[None, :]
    allowed = (shared >= OVERLAP_SHARE * np.maximum(cluster_size, 1)) & (shared >= OVERLAP_SHARE * np.maximum(group_size, 1))
    rows, cols = linear_sum_assignment(np.where(allowed, shared, 0.0), maximize=True)
    return {int(r): known[int(c)] for r, c in zip(rows, cols) if allowed[r, c]}


def _reconcile_categories(run, result, vectors, texts, item_ids, previous) -> _Plan:
    """Map each new cluster to a category, keep items where they were when that is nearly as good.

    Steps: match clusters to existing categories by shared items, then by
    centroid for what is left; create proposed categories for the rest;
    let items keep an open category they were in (STICKY_MARGIN); name new
    categories and refresh the matched ones (a machine name changes only
    when most of a proposed, unreviewed category's items changed).
    """
    # Locked: a reviewer's rename, merge or archive waits for the run, and the
    # run sees the reviewer's latest decision, never overwriting it.
    existing = {
        c.id: c
        for c in Category.objects.select_for_update(of=("self",)).select_related("merged_into").exclude(centroid=None)
    }
    final = {cid: _final(c) for cid, c in existing.items()}
    # As the earlier runs left them: the loop below moves a continued category's centroid.
    stored_centroids = {cid: centroid_of(c) for cid, c in existing.items()}
    previous_final = [
        final[previous[i]].id if previous.get(i) in final else None for i in item_ids
    ]
    labels = result.labels.copy()
    # First the merged categories: a cluster like one a reviewer merged away
    # goes to the category it was merged into (their centroids stay for this).
    merged = [c for c in existing.values() if c.status == Category.Status.MERGED]
    matches = _centroid_matches(result.centroids, range(result.n_clusters), merged)
    rest = [c for c in range(result.n_clusters) if c not in matches]
    still_open = np.where(np.isin(labels, list(matches)), -1, labels)
    matches.update(_overlap_matches(still_open, previous_final, result.n_clusters))
    taken = {final[c].id for c in matches.values()}
    rest = [c for c in range(result.n_clusters) if c not in matches]
    unmatched = [c for c in existing.values() if c.status != Category.Status.MERGED and c.id not in taken]
    matches.update(_centroid_matches(result.centroids, rest, unmatched))

    names = clustering.name_clusters(texts, labels) if result.n_clusters else {}
    keywords = clustering.describe_clusters(texts, labels) if result.n_clusters else {}
    now = timezone.now()
    category_of_cluster: dict[int, Category | None] = {}
    matched = created = 0
    taken_names = {c.name for c in final.values() if c.is_open}
    for cluster in range(result.n_clusters):
        words = keywords.get(cluster, [])
        if cluster in matches:
            category = final[matches[cluster]]
            matched += 1
            if category.status == Category.Status.ARCHIVED:
                # A reviewer archived this failure: its items stay unsorted.
                category_of_cluster[cluster] = None
                continue
            category.keywords = words
            category.last_run = run
            category.updated_at = now
            if category.id == matches[cluster]:
                category.centroid = result.centroids[cluster].astype(np.float32).tobytes()
            members = labels == cluster
            stayed = sum(1 for i in np.flatnonzero(members) if previous_final[i] == category.id)
            if _may_rename(category, stayed=stayed, size=int(members.sum())):
                name = _unique_name(names.get(cluster, ""), taken_names - {category.name})
                if name != category.name:
                    # On the category's history, like a reviewer's rename: a name people know changed.
                    _run_audit(run, category, "renamed", "name", category.name, name)
                    taken_names.discard(category.name)
                    taken_names.add(name)
                category.name = name
                category.description = describe(words)
            category.save(update_fields=["keywords", "last_run", "updated_at", "centroid", "name", "description"])
        else:
            name = _unique_name(names.get(cluster, ""), taken_names)
            taken_names.add(name)
            category = Category.objects.create(
                name=name,
                description=describe(words),
                keywords=words,
                centroid=result.centroids[cluster].astype(np.float32).tobytes(),
                created_by_run=run,
                last_run=run,
            )
            created += 1
        category_of_cluster[cluster] = category

    categories = [category_of_cluster.get(label) if label >= 0 else None for label in labels.tolist()]
    similarity = result.similarity.copy()
    kept = _keep_previous(
        run, vectors, categories, similarity, previous_final, final, category_of_cluster, result, stored_centroids,
        min_size=(clustering.ClusterParams(**run.params) if run.params else clustering.ClusterParams()).min_cluster_size,
    )
    created -= len({c.id for c in category_of_cluster.values() if c is not None and c.created_by_run_id == run.id}
                   - {c.id for c in categories if c is not None})
    for i, category in enumerate(categories):
        if category is None:
            labels[i] = -1
    _store_fit(vectors, categories, item_ids)
    return _Plan(categories, labels, similarity, matched, created, kept)


def _centroid_matches(centroids, clusters, categories) -> dict[int, int]:
    """One-to-one map of the given cluster indices -> category ids by centroid cosine (CATEGORY_MATCH_SIMILARITY)."""
    clusters = list(clusters)
    if not clusters or not categories:
        return {}
    pairs = clustering.match_clusters(
        centroids[clusters],
        np.vstack([centroid_of(c) for c in categories]),
        min_similarity=settings.CATEGORY_MATCH_SIMILARITY,
    )
    return {clusters[row]: categories[col].id for row, col in pairs.items()}


def _may_rename(category: Category, *, stayed: int, size: int) -> bool:
    """A run renames only a proposed category nobody named whose items mostly changed."""
    if category.named_by_reviewer or category.status != Category.Status.PROPOSED:
        return False
    return stayed < 0.5 * size


def _unique_name(name: str, taken: set[str]) -> str:
    name = (name or "Unnamed group")[: Category._meta.get_field("name").max_length - 4]
    if name not in taken:
        return name
    number = 2
    while f"{name} ({number})" in taken:
        number += 1
    return f"{name} ({number})"


def _keep_previous(
    run, vectors, categories, similarity, previous_final, final, category_of_cluster, result, stored_centroids, min_size
) -> int:
    """Keep earlier items in the open category they were in; returns how many stayed because of this.

    An item leaves its category only when it no longer fits it (its cosine
    fell below the category's fit) and an existing category is clearly closer
    (by more than STICKY_MARGIN); it never leaves for a category this run
    created, which gathers new and unsorted items only.
    A new category left with fewer than `min_size` items is dropped again
    (its items wait unsorted). The category's centroid is this run's when a
    cluster continues it, else its stored one. Changes `categories` and
    `similarity` in place.
    """
    centroid_now: dict[int, np.ndarray] = {}
    for cluster, category in category_of_cluster.items():
        if category is not None:
            centroid_now[category.id] = result.centroids[cluster]
    kept = 0
    for i, previous_id in enumerate(previous_final):
        if previous_id is None:
            continue
        previous = final[previous_id]
        now = categories[i]
        if not previous.is_open or (now is not None and now.id == previous_id):
            continue
        centroid = centroid_now.get(previous_id)
        if centroid is None:
            centroid = centroid_of(previous)
        if centroid is None:
            continue
        stay = float(vectors[i] @ centroid)
        created_now = now is None or now.created_by_run_id == run.id
        # An item that still fits its category, as it is now or as the run that
        # placed it saw it (at least its loosest members' cosine), stays: a
        # reviewer's list does not reshuffle because another category drifted nearer.
        stored = stored_centroids.get(previous_id)
        was = stay if stored is None else float(vectors[i] @ stored)
        still_fits = previous.fit_similarity is not None and max(stay, was) >= previous.fit_similarity
        if created_now or still_fits or stay >= similarity[i] - STICKY_MARGIN:
            categories[i] = previous
            similarity[i] = stay
            kept += 1
    members = Counter(c.id for c in categories if c is not None and c.created_by_run_id == run.id)
    too_small = {c.id for c in categories if c is not None and c.created_by_run_id == run.id and members[c.id] < min_size}
    for i, category in enumerate(categories):
        if category is not None and category.id in too_small:
            categories[i] = None
    Category.objects.filter(id__in=too_small).delete()
    return kept


def _store_fit(vectors, categories, item_ids) -> None:
    """Per category of the run: its most representative items, and the cosine its loosest members have.

    Representatives are the items closest to the members' mean. The fit
    (5th percentile of the members' cosines) is how close a new signal must
    come to be sorted in between runs.
    """
    members: dict[int, list[int]] = {}
    for i, category in enumerate(categories):
        if category is not None:
            members.setdefault(category.id, []).append(i)
    for category_id, rows in members.items():
        centroid = clustering._unit_rows(vectors[rows].mean(axis=0, keepdims=True))[0]
        similarity = vectors[rows] @ centroid
        closest = np.argsort(-similarity, kind="stable")[:REPRESENTATIVES]
        Category.objects.filter(id=category_id).update(
            fit_similarity=round(float(np.quantile(similarity, 0.05)), 4),
            representative_ids=[item_ids[rows[j]] for j in closest],
        )


def _reconcile_areas(run, result, vectors, texts, item_ids, plan: _Plan, previous_area) -> list[Area | None]:
    """Give every category of this run an area and every item its area; returns the area per item.

    A category a reviewer moved keeps its area. Otherwise the run's area
    groups are matched to existing areas by the items they share, new ones
    are created and named like categories, and an unsorted item goes to the
    area whose categories are nearest (its "unsorted" bucket there).
    """
    existing = {a.id: a for a in Area.objects.select_for_update(of=("self",)).select_related("merged_into")}
    final = {aid: _final(a) for aid, a in existing.items()}
    item_area_index = result.item_areas(vectors) if result.n_areas else np.full(len(item_ids), -1)
    # A category's group is the one most of its items' clusters are in (an
    # item kept in its earlier category still votes with its new cluster).
    votes: dict[int, Counter] = {}
    if result.area_of_cluster is not None:
        for i, category in enumerate(plan.categories):
            if category is not None and result.labels[i] >= 0:
                votes.setdefault(category.id, Counter())[int(result.area_of_cluster[result.labels[i]])] += 1
    group_of_category = {category_id: counts.most_common(1)[0][0] for category_id, counts in votes.items()}
    groups = np.array(
        [group_of_category.get(c.id, int(item_area_index[i])) if c is not None else int(item_area_index[i])
         for i, c in enumerate(plan.categories)],
        dtype=np.int64,
    )
    previous_final = [final[previous_area[i]].id if previous_area.get(i) in final else None for i in item_ids]
    matches = _overlap_matches(groups, previous_final, result.n_areas)
    names = clustering.name_clusters(texts, groups) if result.n_areas else {}
    taken = {a.name for a in final.values() if a.is_open}
    area_of_group: dict[int, Area] = {}
    for group in range(result.n_areas):
        if group in matches:
            area = final[matches[group]]
            area.last_run = run
            area.save(update_fields=["last_run"])
        else:
            name = _unique_name(names.get(group, ""), taken)
            taken.add(name)
            area = Area.objects.create(name=name, created_by_run=run, last_run=run)
        area_of_group[group] = area

    # Categories take their group's area unless a reviewer placed them.
    area_of_category: dict[int, Area | None] = {}
    seen_categories = {c.id: c for c in plan.categories if c is not None}
    for category_id, category in seen_categories.items():
        area = area_of_group.get(group_of_category.get(category_id, -1))
        if (category.area_by_reviewer or area is None) and category.area_id in final:
            area = final[category.area_id]  # placed by a reviewer, or no cluster of this run speaks for it
        elif area is not None and category.area_id != area.id:
            Category.objects.filter(id=category_id).update(area=area)
        area_of_category[category_id] = area
    _areas_refresh_centroids()
    return [
        area_of_category.get(c.id) if c is not None else area_of_group.get(int(groups[i]))
        for i, c in enumerate(plan.categories)
    ]


def _areas_refresh_centroids() -> None:
    """Each area's centroid: the size-weighted mean of its open categories' centroids."""
    for area in Area.objects.open():
        cats = [c for c in area.categories.open().exclude(centroid=None).only("centroid", "size")]
        if not cats:
            continue
        mean = sum(max(c.size, 1) * centroid_of(c) for c in cats)
        area.centroid = clustering._unit_rows(mean[None, :])[0].astype(np.float32).tobytes()
        area.save(update_fields=["centroid"])


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


def _write_model_assignments(run, item_ids, plan: _Plan, area_of_item) -> int:
    """Replace the model's assignments of the clustered items; reviewer ones stay.

    An item with no category keeps an assignment row with its area only: it
    is in that area's unsorted bucket.
    """
    reviewed = set(
        Assignment.objects.filter(assigned_by=Assignment.By.REVIEWER, item_id__in=item_ids).values_list("item_id", flat=True)
    ) if item_ids else set()
    now = timezone.now()
    rows = []
    assigned_ids, unassigned_ids = [], []
    for item_id, category, area, sim in zip(item_ids, plan.categories, area_of_item, plan.similarity.tolist()):
        if item_id in reviewed:
            continue
        rows.append(
            Assignment(
                item_id=item_id,
                category=category,
                area=area,
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
        update_fields=["category", "area", "confidence", "assigned_by", "run", "updated_at"],
    )
    _reviewed_follow_their_category(reviewed)
    items_set_status(item_ids=assigned_ids, status=FeedbackItem.Status.ASSIGNED, now=now)
    items_set_status(item_ids=unassigned_ids, status=FeedbackItem.Status.EMBEDDED, now=now)
    return len(assigned_ids) + len(reviewed)


def _reviewed_follow_their_category(item_ids) -> None:
    """Items a reviewer placed sit in the area of the category they were placed in."""
    for chunk in _chunks(sorted(item_ids)):
        for category_id, area_id in Category.objects.filter(assignments__item_id__in=chunk).values_list("id", "area_id").distinct():
            Assignment.objects.filter(item_id__in=chunk, category_id=category_id).exclude(area_id=area_id).update(area_id=area_id)


def _chunks(ids: list[int], size: int = 10_000):
    # SQLite caps the number of parameters in one statement.
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def items_set_status(*, item_ids: list[int], status: str, now) -> None:
    for chunk in _chunks(item_ids):
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
                _run_audit(run, category, verb, "items", category.size, size)
            category.size = size
            category.save(update_fields=["size"])


# --- Assignment as signals arrive --------------------------------------------------------


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
    nearest, similarity = clustering.assign_to_nearest(vectors, centroids, threshold=-1.0)
    floors = np.array(
        [min(settings.ASSIGN_SIMILARITY_THRESHOLD, c.fit_similarity or settings.ASSIGN_SIMILARITY_THRESHOLD) for c in categories]
    )
    areas = list(Area.objects.open().exclude(centroid=None).only("id", "centroid"))
    nearest_area = (
        clustering.assign_to_nearest(vectors, np.vstack([centroid_of(a) for a in areas]), threshold=-1.0)[0]
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
    Assignment.objects.bulk_create(
        assignments,
        batch_size=1000,
        update_conflicts=True,
        unique_fields=["item"],
        update_fields=["category", "area", "confidence", "assigned_by", "run", "updated_at"],
    )
    items_set_status(item_ids=[a.item_id for a in assignments if a.category_id], status=FeedbackItem.Status.ASSIGNED, now=now)
    items_set_status(item_ids=[a.item_id for a in assignments if not a.category_id], status=FeedbackItem.Status.EMBEDDED, now=now)
    return assignments
