"""Reads for the overview and search pages."""

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import (
    BooleanField,
    Case,
    CharField,
    Count,
    Exists,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Lower
from django.utils import timezone

from core.ids import id_parse
from core.roles import is_admin
from feedback.models import FeedbackItem
from labeling import counts
from labeling.models import Area, Assignment, Category, ClusterRun, Label
from labeling.review_selectors import labels_hidden_from


@dataclass
class VersionSeries:
    """Daily ratings of one model version (and variant): volume and thumbs-down rate."""

    label: str
    volume: list[int | None]  # None before a version's first rating and after its last: not live, not zero
    down_rate: list[float | None]


def _days(since: date, until: date) -> list[date]:
    return [since + timedelta(days=offset) for offset in range((until - since).days + 1)]


def _live_span(counts: list[int]) -> list[int | None]:
    """Counts between the first and the last day with any, None outside: a version
    not yet released (or retired) has no traffic, which a chart must not draw as 0."""
    days_with = [index for index, count in enumerate(counts) if count]
    first, last = days_with[0], days_with[-1]
    return [count if first <= index <= last else None for index, count in enumerate(counts)]


def ratings_over_time(*, days: int = 30, now: datetime | None = None) -> tuple[list[str], list[VersionSeries]]:
    """Per day and model version/variant: how many ratings, and the share that were thumbs-down."""
    now = now or timezone.now()
    since = (now - timedelta(days=days - 1)).date()
    rows = counts.counted(
        ("day", "model_version", "variant", "rating"), Q(kind=FeedbackItem.Kind.RATING, day__gte=since), daily=True
    )
    calendar = _days(since, now.date())
    position = {day: index for index, day in enumerate(calendar)}
    totals: dict[str, list[int]] = {}
    downs: dict[str, list[int]] = {}
    for (day, model_version, variant, rating), n in rows.items():
        label = model_version or "unknown"
        if variant:
            label += f" · {variant}"
        index = position.get(day)
        if index is None:
            continue
        totals.setdefault(label, [0] * len(calendar))[index] += n
        downs.setdefault(label, [0] * len(calendar))[index] += n if rating == -1 else 0
    series = [
        VersionSeries(
            label=label,
            volume=_live_span(totals[label]),
            down_rate=[round(d / t, 3) if t else None for d, t in zip(downs[label], totals[label])],
        )
        for label in sorted(totals)
    ]
    return [day.isoformat() for day in calendar], series


def version_summary() -> list[dict]:
    """Per model version: ratings, thumbs-down count and rate, reports."""
    versions: dict[str, dict] = {}
    for (model_version, kind, rating), n in counts.counted(("model_version", "kind", "rating")).items():
        row = versions.setdefault(model_version, {"model_version": model_version, "ratings": 0, "down": 0, "reports": 0})
        row["ratings" if kind == FeedbackItem.Kind.RATING else "reports"] += n
        row["down"] += n if rating == -1 else 0
    rows = sorted(versions.values(), key=lambda row: row["model_version"], reverse=True)
    return [dict(row, down_rate=(row["down"] / row["ratings"]) if row["ratings"] else None) for row in rows]


def top_categories(*, limit: int = 10, days: int = 14, now: datetime | None = None) -> list[dict]:
    """The largest open categories with their share of failures and a daily trend."""
    now = now or timezone.now()
    since = (now - timedelta(days=days - 1)).date()
    categories = list(
        Category.objects.open().filter(size__gt=0)
        .order_by("-size", "id")
        .only("id", "name", "status", "size")[:limit]
    )
    total_failures = counts.counted_total(FeedbackItem.FAILURES)
    daily = counts.counted(
        ("category_id", "day"), Q(category_id__in=[category.id for category in categories], day__gte=since), daily=True
    )
    calendar = _days(since, now.date())
    position = {day: index for index, day in enumerate(calendar)}
    trends = {category.id: [0] * len(calendar) for category in categories}
    for (category_id, day), n in daily.items():
        if day in position:
            trends[category_id][position[day]] += n
    return [
        {
            "category": category,
            "share": category.size / total_failures if total_failures else 0.0,
            "trend": trends[category.id],
            "sparkline": sparkline_points(trends[category.id]),
        }
        for category in categories
    ]


def sparkline_points(values: list[int], *, width: int = 120, height: int = 24) -> str:
    """SVG polyline points for a small trend line, drawn on the server (no script needed)."""
    if not values:
        return ""
    top = max(values) or 1
    step = width / max(len(values) - 1, 1)
    return " ".join(f"{i * step:.1f},{height - (v / top) * (height - 2) - 1:.1f}" for i, v in enumerate(values))


def pipeline_health() -> dict:
    by_status = dict(FeedbackItem.objects.values_list("status").annotate(n=Count("id")).order_by())
    return {
        "waiting": by_status.get(FeedbackItem.Status.RECEIVED, 0),
        "failed": by_status.get(FeedbackItem.Status.FAILED, 0),
        "embedded": by_status.get(FeedbackItem.Status.EMBEDDED, 0),
        "assigned": by_status.get(FeedbackItem.Status.ASSIGNED, 0),
        "total": sum(by_status.values()),
        "last_run": ClusterRun.objects.order_by("-created_at", "-id").first(),
    }


@dataclass
class SearchFilters:
    q: str = ""
    source: str = ""
    kind: str = ""
    rating: str = ""
    model_version: str = ""
    variant: str = ""
    category: str = ""
    # "none": in no area; an id: in that area, in one of its categories or unsorted.
    area: str = ""
    status: str = ""
    # "none": not labelled yet; "any": labelled; a verdict: some label says so.
    review: str = ""
    date_from: date | None = None
    date_to: date | None = None
    # A rollout check's name (rollouts.checks), or "any": items it flagged, unless a reviewer dismissed the flag.
    flag: str = ""


def items_search(*, filters: SearchFilters, viewer=None) -> QuerySet[FeedbackItem]:
    """Items matching every given filter, newest first; each word of ``q`` must appear.

    Each item carries `verdict`: the verdict of its label changed last, or None;
    `labels_hidden` and `category_hidden`: what `viewer` may not see of it.

    A second review must stay blind (see review_selectors.labels_hidden_from):
    for a reviewer who still owes one, the item's verdict, and its category
    when a reviewer chose it, are hidden, and no review, category or area
    filter matches it, since an answer to a filter would tell the label just as
    well. Admins (and calls without a viewer) see everything.
    """
    labels = Label.objects.filter(item=OuterRef("pk"))
    latest_verdict = Subquery(labels.order_by("-updated_at", "-id").values("verdict")[:1])
    items = FeedbackItem.objects.select_related("source", "assignment__category", "assignment__area")
    if viewer is None or is_admin(viewer):
        items = items.annotate(
            verdict=latest_verdict,
            labels_hidden=Value(False, output_field=BooleanField()),
            category_hidden=Value(False, output_field=BooleanField()),
        )
    else:
        hidden = labels_hidden_from(viewer)
        items = items.annotate(
            labels_hidden=Case(When(hidden, then=Value(True)), default=Value(False), output_field=BooleanField())
        ).annotate(
            verdict=Case(When(labels_hidden=True, then=Value(None)), default=latest_verdict, output_field=CharField()),
            category_hidden=Case(
                When(labels_hidden=True, assignment__assigned_by=Assignment.By.REVIEWER, then=Value(True)),
                default=Value(False),
                output_field=BooleanField(),
            ),
        )
    # Words are looked up in the scrubbed text (title, comment, expected, as
    # embedded): searching the originals would let anyone confirm a secret or
    # an address prefix by prefix, past the audited reveal. Items still
    # waiting to be embedded are found by their filters only.
    for word in filters.q.split()[:10]:
        items = items.filter(embed_text__icontains=word)
    exact = {
        "source__slug": filters.source,
        "kind": filters.kind,
        "model_version": filters.model_version,
        "variant": filters.variant,
        "status": filters.status,
    }
    items = items.filter(**{field: value for field, value in exact.items() if value})
    items = items.rated(filters.rating)  # the form offers up and down only
    category_id, area_id = id_parse(filters.category), id_parse(filters.area)
    if filters.category == "none" or category_id is not None or filters.area == "none" or area_id is not None:
        items = items.filter(category_hidden=False)
    if filters.category == "none":
        items = items.filter(Q(assignment__isnull=True) | Q(assignment__category__isnull=True))
    elif category_id is not None:
        items = items.filter(assignment__category_id=category_id)
    if filters.area == "none":
        items = items.filter(Q(assignment__isnull=True) | Q(assignment__area__isnull=True))
    elif area_id is not None:
        items = items.filter(assignment__area_id=area_id)
    if filters.review in ("none", "any", *Label.Verdict.values):
        items = items.filter(labels_hidden=False)
    if filters.review == "none":
        items = items.filter(~Exists(labels))
    elif filters.review == "any":
        items = items.filter(Exists(labels))
    elif filters.review in Label.Verdict.values:
        items = items.filter(Exists(labels.filter(verdict=filters.review)))
    if filters.date_from:
        items = items.filter(occurred_at__date__gte=filters.date_from)
    if filters.date_to:
        items = items.filter(occurred_at__date__lte=filters.date_to)
    if filters.flag:
        from rollouts.selectors import (
            items_with_flag,  # rollouts builds on labeling: imported where used
        )

        items = items.filter(items_with_flag(check_name=filters.flag))
    return items.order_by("-occurred_at", "-id")


def search_choices() -> dict:
    """The values the search filters offer."""
    from feedback.models import Source

    # One pass over the items for both menus.
    pairs = list(FeedbackItem.objects.order_by().values_list("model_version", "variant").distinct())
    return {
        "sources": list(Source.objects.values_list("slug", "name")),
        "model_versions": sorted({version for version, _ in pairs} - {""}),
        "variants": sorted({variant for _, variant in pairs} - {""}),
        "categories": list(
            Category.objects.open().filter(size__gt=0)
            .order_by("name")
            .values_list("id", "name")
        ),
        "areas": list(
            Area.objects.open()
            .order_by(Lower("name"), "id")
            .values_list("id", "name")
        ),
        "statuses": FeedbackItem.Status.choices,
        "kinds": FeedbackItem.Kind.choices,
    }

