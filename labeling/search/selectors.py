"""Reads for the search page: items by filters, and the choices its form offers."""

from dataclasses import dataclass
from datetime import date

from django.db.models import (
    BooleanField,
    Case,
    CharField,
    Exists,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Lower

from core.ids import id_parse
from core.roles import is_admin
from feedback.models import FeedbackItem
from labeling.counts import counted, counted_total
from labeling.flags import item_flags
from labeling.models import Area, Assignment, Category, Label
from labeling.review.selectors import labels_hidden_from


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
        items = items.filter(item_flags().flagged(name=filters.flag))
    return items.order_by("-occurred_at", "-id")


# The search filters the pre-aggregated counts are keyed by (same names); `rating` by its value.
_COUNTED_FILTERS = ("kind", "model_version", "variant")
_COUNTED_RATINGS = {"up": FeedbackItem.UP, "down": FeedbackItem.DOWN, "none": 0}


def items_search_count(*, filters: SearchFilters) -> int | None:
    """How many items `items_search` finds, from the pre-aggregated counts; None when they cannot tell.

    They can when every filter given is one the counts are keyed by (kind,
    rating, version, variant): these hide nothing from a blind second
    reviewer, so the count is the same for every viewer. Counting the
    items themselves took 110 ms at a million.
    """
    given = {name for name, value in vars(filters).items() if value}
    if not given <= {*_COUNTED_FILTERS, "rating"} or filters.rating not in ("", *_COUNTED_RATINGS):
        return None
    condition = Q(**{name: getattr(filters, name) for name in _COUNTED_FILTERS if getattr(filters, name)})
    if filters.rating:
        condition &= Q(rating=_COUNTED_RATINGS[filters.rating])
    return counted_total(condition)


def search_choices() -> dict:
    """The values the search filters offer."""
    from feedback.models import Source

    # Both menus from the pre-aggregated counts: a pass over the items took 300 ms at a million.
    pairs = counted(("model_version", "variant"))
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
