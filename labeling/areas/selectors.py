"""Reads for the area pages and the area parts of the category list.

An item's area is on its assignment: with a category it sits in that
category's area, without one it waits in the area's "unsorted" bucket. Every
count a page shows comes from one grouped read of the pre-aggregated counts
(labeling.counts), however many areas and items there are.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from django.core.paginator import Page, Paginator
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Lower

from core.ids import id_parse
from feedback.models import FeedbackItem
from labeling.categories.selectors import PAGE_SIZE
from labeling.counts import counted, counted_total
from labeling.models import Area, Category

NO_AREA = "none"  # the ?area= value for categories (or items) in no area


def _with_counts(areas: QuerySet[Area], *, model_version: str = "") -> list[Area]:
    """The areas, each with its items (sorted or not), unsorted items, thumbs-down and categories.

    The item counts come from the pre-aggregated counts (labeling.counts) in
    one grouped read, whatever the number of areas or items; with a version,
    that version's only. `total_down` on each is every thumbs-down, in an
    area or not: the denominator of its share.
    """
    categories = (
        Category.objects.filter(area=OuterRef("pk"))
        .exclude(status=Category.Status.MERGED)
        .order_by()
        .values("area")
        .annotate(n=Count("id"))
        .values("n")
    )
    areas = list(areas.defer("centroid").annotate(
        n_categories=Coalesce(Subquery(categories, output_field=IntegerField()), Value(0)),
    ))
    scope = Q(model_version=model_version) if model_version else Q()
    figures: dict[int, dict[str, int]] = defaultdict(lambda: {"n_items": 0, "unsorted": 0, "thumbs_down": 0})
    total_down = 0
    for (area_id, category_id, rating), n in counted(("area_id", "category_id", "rating"), scope).items():
        row = figures[area_id]
        row["n_items"] += n
        row["unsorted"] += n if category_id == 0 else 0
        row["thumbs_down"] += n if rating == -1 else 0
        total_down += n if rating == -1 else 0
    for area in areas:
        for name, value in figures[area.id].items():
            setattr(area, name, value)
        area.total_down = total_down
    return areas


# --- The list of areas -----------------------------------------------------------------


def area_list() -> list[Area]:
    """Open areas by name, each with its counts and its share of all thumbs-down (in %, None when there are none)."""
    areas = _with_counts(Area.objects.open().order_by(Lower("name"), "id"))
    for area in areas:
        area.down_share = 100 * area.thumbs_down / area.total_down if area.total_down else None
    return areas


def top_areas(*, limit: int = 10) -> list[Area]:
    """The open areas with the most items, for the overview: counts and share of all thumbs-down, in one query."""
    areas = [area for area in _with_counts(Area.objects.open()) if area.n_items]
    areas = sorted(areas, key=lambda area: (-area.n_items, area.name.lower(), area.id))[:limit]
    for area in areas:
        area.down_share = 100 * area.thumbs_down / area.total_down if area.total_down else None
    return areas


def areas_merged() -> QuerySet[Area]:
    """Merged areas and where they went, newest first."""
    return (
        Area.objects.filter(status=Area.Status.MERGED)
        .select_related("merged_into")
        .defer("centroid", "merged_into__centroid")
        .order_by("-created_at", "-id")
    )


def unsorted_total() -> int:
    """Failure signals in no area and no category: waiting for a cluster run or a reviewer."""
    # From the pre-aggregated counts, where no category and no area are both 0.
    return counted_total(FeedbackItem.FAILURES & Q(category_id=0, area_id=0))


# --- One area ----------------------------------------------------------------------------


def area_with_counts(*, area_id: int) -> Area | None:
    found = _with_counts(
        Area.objects.filter(id=area_id)
        .select_related("merged_into", "created_by_run", "last_run")
        .defer("merged_into__centroid")
    )
    area = found[0] if found else None
    if area is not None:
        area.down_share = 100 * area.thumbs_down / area.total_down if area.total_down else None
    return area


def area_categories(*, area: Area) -> QuerySet[Category]:
    """The categories in an area, biggest first (merged ones left out: their items moved on)."""
    return (
        Category.objects.filter(area=area)
        .exclude(status=Category.Status.MERGED)
        .only("id", "name", "status", "size", "named_by_reviewer", "area_by_reviewer", "keywords")
        .order_by("-size", Lower("name"), "id")
    )


def area_unsorted_items(*, area: Area) -> QuerySet[FeedbackItem]:
    """The area's unsorted bucket: items in the area that no category claims, newest first."""
    return FeedbackItem.objects.filter(assignment__area=area, assignment__category=None).order_by("-occurred_at", "-id")


def area_unsorted_page(*, area: Area, page_number) -> Page:
    return Paginator(area_unsorted_items(area=area), PAGE_SIZE).get_page(page_number)


def area_merge_targets(*, area: Area) -> QuerySet[Area]:
    """Where an area may be merged into: any other open area."""
    return Area.objects.open().exclude(id=area.id).only("id", "name").order_by(Lower("name"), "id")


def area_choices() -> QuerySet[Area]:
    """Open areas for a menu (moving a category, filtering a search)."""
    return Area.objects.open().only("id", "name").order_by(Lower("name"), "id")


# --- Areas on the category list ------------------------------------------------------------


def areas_by_id(*, model_version: str = "") -> dict[int, Area]:
    """Every area (merged ones too: a link may still name them) with its counts, by id, in one query."""
    areas = _with_counts(Area.objects.order_by(Lower("name"), "id"), model_version=model_version)
    return {area.id: area for area in areas}


@dataclass(frozen=True)
class AreaFilter:
    """What a ``?area=`` value means: "" every area, NO_AREA, or an area id (as text); notice: why it was read so."""

    value: str = ""
    area: Area | None = None
    notice: str = ""


def area_filter_parse(raw: str, *, areas: dict[int, Area]) -> AreaFilter:
    """Read ``?area=`` against the known areas; what names no area is ignored with a notice, never an error."""
    raw = (raw or "").strip()
    if raw in ("", NO_AREA):
        return AreaFilter(value=raw)
    area_id = id_parse(raw)
    if area_id is None:
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        return AreaFilter(notice=f"“{shown}” is not an area; showing every area.")
    area = areas.get(area_id)
    if area is None:
        return AreaFilter(notice=f"There is no area #{area_id}; showing every area.")
    seen = set()
    final = area
    while final.status == Area.Status.MERGED and final.merged_into_id in areas and final.id not in seen:
        seen.add(final.id)
        final = areas[final.merged_into_id]
    if final.id != area.id:
        return AreaFilter(
            value=str(final.id), area=final, notice=f"“{area.name}” was merged into “{final.name}”; showing “{final.name}”."
        )
    return AreaFilter(value=str(area.id), area=area)


@dataclass
class AreaGroup:
    """Consecutive categories of one area on a page of the category list (area None: no area)."""

    area: Area | None
    categories: list[Category] = field(default_factory=list)


def area_groups(categories, *, areas: dict[int, Area]) -> list[AreaGroup]:
    """Cut a page of categories, already ordered area by area, into one group per area."""
    groups: list[AreaGroup] = []
    for category in categories:
        area = areas.get(category.area_id)
        if not groups or groups[-1].area is not area:
            groups.append(AreaGroup(area=area))
        groups[-1].categories.append(category)
    return groups


def area_order_key(areas: dict[int, Area]):
    """Sort key for categories: area by area (by name), categories in no area last."""
    position = {area_id: index for index, area_id in enumerate(areas)}  # areas_by_id is ordered by name
    return lambda category: position.get(category.area_id, len(position))
