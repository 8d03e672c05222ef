"""A run's clusters reconciled with the categories and areas people already know: matched by the
items they share (or their centroids), so ids, reviewers' names and statuses survive; named;
and the model's assignments written, never over a reviewer's."""

from collections import Counter

import numpy as np
from django.conf import settings
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.clustering.algorithm import ClusterParams, match_clusters
from labeling.clustering.names import describe_clusters, name_clusters
from labeling.clustering.services import (
    assignments_upsert,
    centroid_of,
    id_chunks,
    items_set_status,
    run_audit,
)
from labeling.clustering.vectors import unit_rows
from labeling.models import Area, Assignment, Category

# An earlier item stays in its category unless an existing category's
# centroid is more than this much more similar: runs over slightly
# different data keep what people have already seen.
STICKY_MARGIN = 0.15
REPRESENTATIVES = 5

# A new cluster continues an existing category (or area) when at least this
# share of its items were in it, and this share of those items came along.
OVERLAP_SHARE = 0.3


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


def reconcile_categories(run, result, vectors, texts, item_ids, previous) -> _Plan:
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

    names = name_clusters(texts, labels) if result.n_clusters else {}
    keywords = describe_clusters(texts, labels) if result.n_clusters else {}
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
                    run_audit(run, category, "renamed", "name", category.name, name)
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
        min_size=(ClusterParams(**run.params) if run.params else ClusterParams()).min_cluster_size,
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
    pairs = match_clusters(
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
        centroid = unit_rows(vectors[rows].mean(axis=0, keepdims=True))[0]
        similarity = vectors[rows] @ centroid
        closest = np.argsort(-similarity, kind="stable")[:REPRESENTATIVES]
        Category.objects.filter(id=category_id).update(
            fit_similarity=round(float(np.quantile(similarity, 0.05)), 4),
            representative_ids=[item_ids[rows[j]] for j in closest],
        )


def reconcile_areas(run, result, vectors, texts, item_ids, plan: _Plan, previous_area) -> list[Area | None]:
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
    names = name_clusters(texts, groups) if result.n_areas else {}
    keywords = describe_clusters(texts, groups) if result.n_areas else {}
    taken = {a.name for a in final.values() if a.is_open}
    area_of_group: dict[int, Area] = {}
    for group in range(result.n_areas):
        if group in matches:
            area = final[matches[group]]
            area.last_run = run
            area.keywords = keywords.get(group, [])
            area.save(update_fields=["last_run", "keywords"])
        else:
            name = _unique_name(names.get(group, ""), taken)
            taken.add(name)
            area = Area.objects.create(name=name, keywords=keywords.get(group, []), created_by_run=run, last_run=run)
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
        area.centroid = unit_rows(mean[None, :])[0].astype(np.float32).tobytes()
        area.save(update_fields=["centroid"])


def describe(keywords: list[str]) -> str:
    """A sentence of up to five keywords, leaving out one whose words the keywords before it already say
    ("unnecessary clarification" after "asks unnecessary" and "clarification questions")."""
    said: set[str] = set()
    kept = []
    for keyword in keywords:
        words = set(keyword.split())
        if words <= said:
            continue
        kept.append(keyword)
        said |= words
        if len(kept) == 5:
            break
    return "Signals that mention " + ", ".join(kept) + "." if kept else ""


def write_model_assignments(run, item_ids, plan: _Plan, area_of_item) -> int:
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
    assignments_upsert(rows)
    _reviewed_follow_their_category(reviewed)
    items_set_status(item_ids=assigned_ids, status=FeedbackItem.Status.ASSIGNED, now=now)
    items_set_status(item_ids=unassigned_ids, status=FeedbackItem.Status.EMBEDDED, now=now)
    return len(assigned_ids) + len(reviewed)


def _reviewed_follow_their_category(item_ids) -> None:
    """Items a reviewer placed sit in the area of the category they were placed in."""
    for chunk in id_chunks(sorted(item_ids)):
        for category_id, area_id in Category.objects.filter(assignments__item_id__in=chunk).values_list("id", "area_id").distinct():
            Assignment.objects.filter(item_id__in=chunk, category_id=category_id).exclude(area_id=area_id).update(area_id=area_id)
