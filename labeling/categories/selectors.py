"""Reads for the category pages and the cluster-run pages.

Every figure a list shows is computed by the database in the query that
fetches the page (sums of the pre-aggregated daily counts, labeling.counts),
so a page costs the same number of queries whether it shows 5 categories or
50, and the same time whether they hold a thousand items or a million.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from django.core.paginator import Page, Paginator
from django.db.models import Q, QuerySet
from django.db.models.functions import Lower
from django.utils import timezone

from core.ids import id_parse, is_id
from core.roles import is_admin
from feedback.models import FeedbackItem
from labeling.clustering.algorithm import DIMENSIONS
from labeling.counts import counted, counted_total
from labeling.models import Assignment, AuditEvent, Category, ClusterRun
from labeling.review.selectors import labels_hidden_from

PAGE_SIZE = 50
GROWTH_WINDOW = timedelta(days=7)
# Centroids at least this similar are offered as a merge on the category list. Runs keep
# a category's identity from 0.8 (CATEGORY_MATCH_SIMILARITY); pieces of one failure mode
# worded differently sit a little below.
MERGE_SUGGESTION_SIMILARITY = 0.75

# What the list shows when no status is chosen: the categories a reviewer
# still works with. Merged and archived ones, and proposals that lost all
# their items, are one filter away ("all" or their own status).
DEFAULT_STATUS = ""
ALL_STATUSES = "all"
STATUS_CHOICES = [
    (DEFAULT_STATUS, "Active (confirmed, proposed with items)"),
    (ALL_STATUSES, "All"),
    *Category.Status.choices,
]

# Sort keys of category_list's rows (every one ends in the id, so the order is total).
SORTS = {
    "size": lambda category: (-category.n_items, category.id),
    "growth": lambda category: (-category.growth, -category.n_items, category.id),
    "name": lambda category: (category.name.lower(), category.id),
    "newest": lambda category: (-category.created_at.timestamp(), -category.id),
}
COUNT_FIELDS = ("n_items", "thumbs_down", "reports", "recent", "previous")
DEFAULT_SORT = "size"
SORT_CHOICES = [("size", "Size"), ("growth", "Growth (7 days)"), ("name", "Name"), ("newest", "Newest")]


@dataclass(frozen=True)
class CategoryListFilters:
    status: str = DEFAULT_STATUS
    model_version: str = ""
    search: str = ""
    sort: str = DEFAULT_SORT
    # "" every area, "none" categories in no area, or an area id (as text) that
    # labeling.areas.selectors.area_filter_parse has read.
    area: str = ""


def category_list(*, filters: CategoryListFilters, now: datetime | None = None) -> list[Category]:
    """Categories with their counts, filtered and sorted.

    Counts come from the pre-aggregated counts (labeling.counts) in two
    grouped reads, whatever the number of categories or items; categories
    number hundreds, so they are sorted here. With a model version chosen
    every count covers that version's items only, and categories without
    such items are left out.
    """
    today = (now or timezone.now()).date()
    # Growth compares the last seven days (today included) with the seven before.
    recent_start = today - (GROWTH_WINDOW - timedelta(days=1))
    previous_start = recent_start - GROWTH_WINDOW
    scope = ~Q(category_id=0) & (Q(model_version=filters.model_version) if filters.model_version else Q())
    figures: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNT_FIELDS, 0))
    for (category_id, kind, rating), n in counted(("category_id", "kind", "rating"), scope).items():
        row = figures[category_id]
        row["n_items"] += n
        row["thumbs_down"] += n if rating == -1 else 0
        row["reports"] += n if kind == FeedbackItem.Kind.REPORT else 0
    for (category_id, day), n in counted(("category_id", "day"), scope & Q(day__gte=previous_start), daily=True).items():
        figures[category_id]["recent" if day >= recent_start else "previous"] += n

    # The centroid is a 1.5 kB vector no list needs.
    categories = Category.objects.defer("centroid")
    if filters.status in Category.Status.values:
        categories = categories.filter(status=filters.status)
    elif filters.status != ALL_STATUSES:
        categories = categories.open()
    if filters.search:
        categories = categories.filter(name__icontains=filters.search)
    if filters.area == "none":
        categories = categories.filter(area__isnull=True)
    elif is_id(filters.area):
        categories = categories.filter(area_id=id_parse(filters.area))
    listed = []
    for category in categories:
        for field, value in figures[category.id].items():
            setattr(category, field, value)
        category.growth = category.recent - category.previous
        hidden = filters.status not in (ALL_STATUSES, *Category.Status.values) and (
            category.status == Category.Status.PROPOSED and not category.n_items
        )
        if not hidden and not (filters.model_version and not category.n_items):
            listed.append(category)
    sort = SORTS.get(filters.sort, SORTS[DEFAULT_SORT])
    return sorted(listed, key=sort)


def category_list_page(
    *,
    filters: CategoryListFilters,
    page_number,
    now: datetime | None = None,
    thumbs_down: dict[str, int] | None = None,
    area_order=None,
) -> Page:
    """One page of `category_list`, each row with its share of all thumbs-down and its growth, in %.

    ``thumbs_down``: `thumbs_down_by_version()` when the caller has it already.
    ``area_order``: a sort key (labeling.areas.selectors.area_order_key) that
    puts the categories area by area, each area's in the chosen order.
    """
    categories = category_list(filters=filters, now=now)
    if area_order is not None:
        categories.sort(key=area_order)  # stable: the chosen sort holds within each area
    page = Paginator(categories, PAGE_SIZE).get_page(page_number)
    if thumbs_down is None:
        total_down = thumbs_down_total(model_version=filters.model_version)
    elif filters.model_version:
        total_down = thumbs_down.get(filters.model_version, 0)
    else:
        total_down = sum(thumbs_down.values())
    for category in page.object_list:
        category.down_share = 100 * category.thumbs_down / total_down if total_down else None
        # Growth against an empty previous week has no meaningful percentage.
        category.growth_pct = 100 * category.growth / category.previous if category.previous else None
    # The share bars are drawn against the largest share on the page: on a 0-100% scale a
    # category with 4% of all thumbs-down, which is a lot among fifty, looks empty.
    page.share_max = max((c.down_share for c in page.object_list if c.down_share), default=None)
    for category in page.object_list:
        category.down_share_max = page.share_max or 100
    return page


def thumbs_down_total(*, model_version: str = "") -> int:
    down = Q(rating=FeedbackItem.DOWN)
    return counted_total(down & Q(model_version=model_version) if model_version else down)


def thumbs_down_by_version() -> dict[str, int]:
    """Thumbs-down per model version, every version present (0 if none; "" for items without one).

    One grouped read gives both the version menu and the list's share denominator.
    """
    found: dict[str, int] = {}
    for (model_version, rating), n in counted(("model_version", "rating")).items():
        found[model_version] = found.get(model_version, 0) + (n if rating == -1 else 0)
    return found


# --- One category ----------------------------------------------------------------


RATING_CHOICES = [("", "Any"), ("down", "Thumbs-down"), ("up", "Thumbs-up"), ("none", "No rating (reports)")]
ASSIGNED_BY_CHOICES = [("", "Anyone"), *Assignment.By.choices]


@dataclass(frozen=True)
class CategoryItemFilters:
    rating: str = ""
    model_version: str = ""
    variant: str = ""
    assigned_by: str = ""


def category_items(*, category: Category, filters: CategoryItemFilters, viewer=None) -> QuerySet[FeedbackItem]:
    """The category's items, newest first. For a reviewer who still owes a blind second review
    of an item a reviewer put here, that item is left out: being listed would tell them the
    first reviewer's category (admins, and calls without a viewer, see every item)."""
    items = FeedbackItem.objects.filter(assignment__category=category).select_related(
        "assignment", "assignment__reviewer"
    )
    if viewer is not None and not is_admin(viewer):
        items = items.exclude(labels_hidden_from(viewer) & Q(assignment__assigned_by=Assignment.By.REVIEWER))
    items = items.rated(filters.rating)
    if filters.model_version:
        items = items.filter(model_version=filters.model_version)
    if filters.variant:
        items = items.filter(variant=filters.variant)
    if filters.assigned_by in Assignment.By.values:
        items = items.filter(assignment__assigned_by=filters.assigned_by)
    return items.order_by("-occurred_at", "-id")


def category_items_page(*, category: Category, filters: CategoryItemFilters, page_number, viewer=None) -> Page:
    items = category_items(category=category, filters=filters, viewer=viewer)
    return Paginator(items, PAGE_SIZE).get_page(page_number)


@dataclass(frozen=True)
class ItemBreakdown:
    # The model versions and variants that occur in a category, for its filter menus.
    facets: dict[str, list[str]]
    # Per model version: thumbs-down, thumbs-up, reports and all items, most thumbs-down first.
    version_counts: list[dict]


def category_item_breakdown(*, category: Category) -> ItemBreakdown:
    """The filter menus and the per-version counts of a category, in one read of the pre-aggregated counts."""
    versions: dict[str, dict] = {}
    variants = set()
    found = counted(("model_version", "variant", "kind", "rating"), Q(category_id=category.id))
    for (model_version, variant, kind, rating), n in found.items():
        variants.add(variant)
        counts = versions.setdefault(
            model_version, {"model_version": model_version, "thumbs_down": 0, "thumbs_up": 0, "reports": 0, "total": 0}
        )
        counts["thumbs_down"] += n if rating == FeedbackItem.DOWN else 0
        counts["thumbs_up"] += n if rating == FeedbackItem.UP else 0
        counts["reports"] += n if kind == FeedbackItem.Kind.REPORT else 0
        counts["total"] += n
    return ItemBreakdown(
        facets={"model_versions": sorted(set(versions) - {""}), "variants": sorted(variants - {""})},
        version_counts=sorted(versions.values(), key=lambda c: (-c["thumbs_down"], c["model_version"])),
    )


def category_representatives(*, category: Category) -> list[FeedbackItem]:
    """The representative items in the order clustering ranked them; vanished ones are skipped."""
    ids = [i for i in category.representative_ids if isinstance(i, int)]
    found = FeedbackItem.objects.only("id", "kind", "rating", "title", "comment", "model_version").in_bulk(ids)
    return [found[i] for i in ids if i in found]


@dataclass(frozen=True)
class MergeSuggestion:
    source: Category  # merged away: the smaller, unless only the other is confirmed
    target: Category
    similarity: float

    @property
    def percent(self) -> int:
        return round(100 * self.similarity)


def merge_suggestions(*, min_similarity: float = MERGE_SUGGESTION_SIMILARITY, limit: int = 8) -> list[MergeSuggestion]:
    """Pairs of open categories whose centroids are this close, closest first; each category in one pair at most.

    Runs split one failure mode that users word several ways into pieces
    (README, "Granularity"); these are the merges a reviewer most likely wants.
    """
    categories = [
        category
        for category in Category.objects.open().filter(size__gt=0).only("id", "name", "status", "size", "centroid")
        if category.centroid and len(category.centroid) == DIMENSIONS * 4  # float32
    ]
    if len(categories) < 2:
        return []
    centroids = np.stack([np.frombuffer(category.centroid, dtype=np.float32) for category in categories])
    similarity = np.triu(centroids @ centroids.T, k=1)  # each pair once, no category with itself
    rows, columns = np.nonzero(similarity >= min_similarity)
    suggestions: list[MergeSuggestion] = []
    paired: set[int] = set()
    for index in np.argsort(-similarity[rows, columns], kind="stable"):
        a, b = categories[rows[index]], categories[columns[index]]
        if a.id in paired or b.id in paired:
            continue
        paired.update((a.id, b.id))
        target, source = (a, b) if _stays(a, b) else (b, a)
        suggestions.append(MergeSuggestion(source, target, float(similarity[rows[index], columns[index]])))
        if len(suggestions) == limit:
            break
    return suggestions


def _stays(a: Category, b: Category) -> bool:
    """Does `a` stay when the two merge? A confirmed category over a proposed one, else the bigger."""
    a_confirmed, b_confirmed = a.status == Category.Status.CONFIRMED, b.status == Category.Status.CONFIRMED
    if a_confirmed != b_confirmed:
        return a_confirmed
    return (a.size, -a.id) >= (b.size, -b.id)


def category_merge_targets(*, category: Category) -> QuerySet[Category]:
    """Where a category may be merged into: any other open category."""
    return (
        Category.objects.open()
        .exclude(id=category.id)
        .only("id", "name", "size", "status")
        .order_by(Lower("name"), "id")
    )


# --- Cluster runs ------------------------------------------------------------------


def run_list_page(*, page_number) -> Page:
    return Paginator(ClusterRun.objects.select_related("started_by"), PAGE_SIZE).get_page(page_number)


def run_new_categories(*, run: ClusterRun) -> QuerySet[Category]:
    """The categories this run proposed (as they are now: reviewers may have renamed them)."""
    return Category.objects.filter(created_by_run=run).only("id", "name", "status", "size").order_by("-size", "id")


def run_changes(*, run: ClusterRun) -> dict[str, list[dict]]:
    """What the run did to categories that existed before it: renamed, resized and retired, with before and after."""
    changes: dict[str, list[dict]] = {"renamed": [], "resized": [], "retired": []}
    suffix = f" by cluster run #{run.id}"
    events = AuditEvent.objects.filter(action__endswith=suffix).select_related("category").order_by("id")
    for event in events:
        verb = event.action.removesuffix(suffix)
        if verb in changes and event.category is not None and isinstance(event.details, dict) and event.details:
            change = next(iter(event.details.values()))
            if isinstance(change, dict):
                changes[verb].append({"category": event.category, "before": change.get("before"), "after": change.get("after")})
    return changes


def run_duration(*, run: ClusterRun, now: datetime | None = None) -> timedelta | None:
    """How long the run took, or has been running so far."""
    if run.started_at is None:
        return None
    end = run.finished_at or (now or timezone.now())
    return end - run.started_at
