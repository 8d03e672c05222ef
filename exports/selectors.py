"""Reads for the exports: which items a dataset takes (as records, streamed), datasets and versions."""

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, time, timedelta
from itertools import islice

from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast

from exports.models import (
    Dataset,
    DatasetVersion,
    DatasetVersionItem,
    ExportRun,
    Purpose,
)
from exports.records import (
    CONTEXT_TEXT,
    ITEM_COLUMNS,
    OPPOSITE_COLUMN,
    VECTOR_COLUMN,
    ExportRecord,
    record_from_row,
)
from exports.schemas import StoredFilters
from feedback.models import FeedbackItem
from feedback.scrubber import ScrubMemo
from labeling.areas.selectors import area_choices
from labeling.models import Area, Assignment, Category, DatasetPin, Label, Settlement
from labeling.review.agreement import labels_disagree, settled_label, settlement_holds
from rollouts.selectors import confirmed_checks_for

# Rows per round trip of the server-side cursor: large enough to amortise the
# per-chunk prefetch queries, small enough that memory stays flat.
CHUNK_SIZE = 2000
LABEL_FIELDS = (
    "id",
    "item_id",
    "verdict",
    "severity",
    "tags",
    "hint",
    "corrected_response",
    "split",
    "updated_at",
    "category__id",
    "category__name",
    "category__status",
    "category__merged_into__id",
    "category__merged_into__name",
)


def _labels(**conditions) -> Exists:
    return Exists(Label.objects.filter(item=OuterRef("pk"), **conditions))


def _tag_condition(tags: list[str]) -> Q:
    """Labels carrying any of the tags, on every database.

    PostgreSQL answers JSON containment directly; SQLite has no such operator,
    so there the stored JSON text is searched for the quoted tag, which is
    exact because quotes inside a tag are escaped in that text.
    """
    condition = Q()
    for tag in tags:
        if connection.vendor == "postgresql":
            condition |= Q(tags__contains=[tag])
        else:
            condition |= Q(tags_text__contains=json.dumps(tag))
    return condition


def categories_with_merged(category_ids: list[int]) -> set[int]:
    """The ids plus every category merged into one of them (labels may still name those)."""
    wanted = set(category_ids)
    frontier = set(category_ids)
    while frontier:
        frontier = set(Category.objects.filter(merged_into__in=frontier).values_list("id", flat=True)) - wanted
        wanted |= frontier
    return wanted


def areas_followed(area_ids: list[int]) -> set[int]:
    """The areas a filter's ids mean: a merged area stands for the area it ended up in, and
    every area merged into one of those is included too (an assignment may still name it)."""
    merged = dict(
        Area.objects.filter(status=Area.Status.MERGED, merged_into__isnull=False).values_list("id", "merged_into_id")
    )

    def final(area_id: int) -> int:
        seen = set()
        while area_id in merged and area_id not in seen:
            seen.add(area_id)
            area_id = merged[area_id]
        return area_id

    targets = {final(area_id) for area_id in area_ids}
    return targets | {area_id for area_id in merged if final(area_id) in targets}


def items_matching(*, filters: StoredFilters, pinned_to: int | None = None) -> QuerySet[FeedbackItem]:
    """Items that may match: exact for item fields, a superset for label fields.

    Label fields are decided on an item's latest label, which a query cannot
    pick cheaply; record_passes() finishes the check on each streamed record.
    `pinned_to`: a dataset id whose pinned items are taken whatever the filters say.
    """
    items = _items_filtered(filters)
    if pinned_to is None:
        return items
    return items | FeedbackItem.objects.filter(id__in=DatasetPin.objects.filter(dataset_id=pinned_to).values("item_id"))


def pinned_item_ids(*, dataset_id: int) -> set[int]:
    """Items a reviewer pinned to the dataset (a bulk action): its exports take them whatever the filters say."""
    return set(DatasetPin.objects.filter(dataset_id=dataset_id).values_list("item_id", flat=True))


def _items_filtered(filters: StoredFilters) -> QuerySet[FeedbackItem]:
    items = FeedbackItem.objects.rated(filters.rating)
    if filters.kinds:
        items = items.filter(kind__in=filters.kinds)
    if filters.model_versions:
        items = items.filter(model_version__in=filters.model_versions)
    if filters.variants:
        items = items.filter(variant__in=filters.variants)
    if filters.sources:
        items = items.filter(source__slug__in=filters.sources)
    if filters.date_from:
        items = items.filter(occurred_at__gte=datetime.combine(filters.date_from, time.min, tzinfo=UTC))
    # date_to includes its whole day: before the next midnight. The last day `date`
    # holds (9999-12-31, stored before the range was checked) has no next day, and
    # every time there is falls before it: no bound, rather than an OverflowError.
    if filters.date_to and filters.date_to < date.max:
        items = items.filter(
            occurred_at__lt=datetime.combine(filters.date_to + timedelta(days=1), time.min, tzinfo=UTC)
        )
    if filters.reviewed_only:
        items = items.filter(_labels())
    if filters.verdicts:
        items = items.filter(_labels(verdict__in=filters.verdicts))
    if filters.has_hint:
        items = items.filter(Exists(Label.objects.filter(item=OuterRef("pk")).exclude(hint="")))
    if filters.has_corrected_response:
        items = items.filter(Exists(Label.objects.filter(item=OuterRef("pk")).exclude(corrected_response="")))
    if filters.tags:
        labels = Label.objects.filter(item=OuterRef("pk"))
        if connection.vendor != "postgresql":
            labels = labels.annotate(tags_text=Cast("tags", TextField()))
        items = items.filter(Exists(labels.filter(_tag_condition(filters.tags))))
    if filters.categories:
        ids = categories_with_merged(filters.categories)
        items = items.filter(
            _labels(category__in=ids) | Exists(Assignment.objects.filter(item=OuterRef("pk"), category__in=ids))
        )
    if filters.areas:
        # The area is the assignment's, whether a category of the area claims the item or it waits unsorted.
        items = items.filter(assignment__area__in=areas_followed(filters.areas))
    return items


def record_passes(record: ExportRecord, filters: StoredFilters, *, category_ids: set[int]) -> bool:
    """The label-level filters, decided on the item's latest label.

    ``category_ids``: categories_with_merged(filters.categories), computed once per export.
    """
    if filters.reviewed_only and not record.reviewed:
        return False
    if filters.verdicts and record.verdict not in filters.verdicts:
        return False
    if filters.has_hint and not record.hint.strip():
        return False
    if filters.has_corrected_response and not record.corrected_response.strip():
        return False
    if filters.tags and not set(filters.tags) & set(record.tags):
        return False
    return not (filters.categories and record.category_id not in category_ids)


def items_for_export(items: QuerySet[FeedbackItem], *, with_vector: bool) -> QuerySet:
    """The rows the export streams, ordered by id, related columns joined in (named tuples)."""
    columns = ITEM_COLUMNS + ((VECTOR_COLUMN,) if with_vector else ())
    if OPPOSITE_COLUMN in items.query.annotations:
        columns += (OPPOSITE_COLUMN,)
    items = items.annotate(**{CONTEXT_TEXT: Cast("context", output_field=TextField())})
    return items.order_by("id").values_list(*columns, named=True)


def labels_for_export(*, item_ids: list[int]) -> tuple[dict[int, Label], set[int]]:
    """Which judgement of each item the export writes, and which items are disputed.

    An item's reviewers agree (or one reviewer labelled it): the label changed
    last, so a reviewer's relabel replaces their earlier one. They disagree on
    the verdict, or on the category of a failure: the settlement, while it
    still stands, as a label; without one the item is disputed, and it comes
    back with its latest label only for readers that need every item. One
    query per chunk, and one more only when the chunk holds a disagreement.
    """
    labels = (
        Label.objects.filter(item_id__in=item_ids)
        .select_related("category__merged_into")
        .only(*LABEL_FIELDS)
        .order_by("item_id", "-updated_at", "-id")
    )
    by_item: dict[int, list[Label]] = {}
    for label in labels:
        by_item.setdefault(label.item_id, []).append(label)
    chosen = {item_id: group[0] for item_id, group in by_item.items()}
    contested = [item_id for item_id, group in by_item.items() if len(group) > 1 and labels_disagree(group)]
    if not contested:
        return chosen, set()
    settlements = Settlement.objects.filter(item_id__in=contested).select_related("category__merged_into")
    settlements = {settlement.item_id: settlement for settlement in settlements}
    disputed = set()
    for item_id in contested:
        settlement = settlements.get(item_id)
        if settlement_holds(settlement, by_item[item_id]):
            chosen[item_id] = settled_label(settlement)
        else:
            disputed.add(item_id)
    return chosen, disputed


def records_stream(
    items: QuerySet[FeedbackItem],
    *,
    with_vector: bool,
    extra_patterns: Sequence[tuple[str, str]] = (),
    chunk_size: int | None = None,
    disputed: list[int] | None = None,
    memo: ScrubMemo | None = None,
) -> Iterator[list[ExportRecord]]:
    """Chunks of scrubbed records (`extra_patterns` on top of the built-in rules),
    read through a server-side cursor; never all items at once.

    Labels are read once per chunk rather than with prefetch_related, which
    builds a queryset per item and costs more than the records themselves.

    `disputed`: when given, items whose reviewers disagree and no standing
    settlement says which label is true are left out, and their ids appended
    to it. Without it every item comes, a disputed one with its latest label:
    the held-out check and a version's rewrite need all their items.
    """
    chunk_size = chunk_size or CHUNK_SIZE
    # One memo for the whole stream (the export passes its own, shared with its self-check).
    memo = memo if memo is not None else ScrubMemo(extra_patterns)
    rows = items_for_export(items, with_vector=with_vector).iterator(chunk_size=chunk_size)
    while True:
        chunk = list(islice(rows, chunk_size))
        if not chunk:
            return
        labels, contested = labels_for_export(item_ids=[row.id for row in chunk])
        if disputed is not None and contested:
            disputed.extend(row.id for row in chunk if row.id in contested)
            chunk = [row for row in chunk if row.id not in contested]
        confirmed = confirmed_checks_for(item_ids=[row.id for row in chunk])
        yield [
            record_from_row(
                row,
                label=labels.get(row.id),
                extra_patterns=extra_patterns,
                confirmed_checks=confirmed.get(row.id, ()),
                memo=memo,
            )
            for row in chunk
        ]


def in_versions_of(*, purpose: str | None = None, dataset: Dataset | None = None) -> Exists:
    """Is the item a member of some version (of that purpose, of that dataset)?"""
    members = DatasetVersionItem.objects.filter(item=OuterRef("pk"))
    if purpose is not None:
        members = members.filter(version__purpose=purpose)
    if dataset is not None:
        members = members.filter(version__dataset=dataset)
    return Exists(members)


def version_members(*, version: DatasetVersion) -> QuerySet[FeedbackItem]:
    return FeedbackItem.objects.filter(id__in=DatasetVersionItem.objects.filter(version=version).values("item_id"))


def eval_member_items() -> QuerySet[FeedbackItem]:
    """Every item in some eval version: what train exports must stay away from."""
    return FeedbackItem.objects.filter(
        id__in=DatasetVersionItem.objects.filter(version__purpose=Purpose.EVAL).values("item_id")
    )


def datasets_list() -> list[Dataset]:
    """Every dataset with its latest version and latest run (three queries in all)."""
    datasets = list(Dataset.objects.select_related("periodic_task").order_by("name"))
    latest_versions = {}
    for version in DatasetVersion.objects.filter(dataset__in=datasets).order_by("dataset_id", "-number"):
        latest_versions.setdefault(version.dataset_id, version)
    latest_runs = {}
    runs = ExportRun.objects.filter(dataset__in=datasets).select_related("version", "matched_version")
    for run in runs.order_by("dataset_id", "-created_at", "-id"):
        latest_runs.setdefault(run.dataset_id, run)
    for dataset in datasets:
        dataset.latest_version = latest_versions.get(dataset.id)
        dataset.latest_run = latest_runs.get(dataset.id)
    return datasets


def dataset_versions(*, dataset: Dataset) -> QuerySet[DatasetVersion]:
    return dataset.versions.select_related("created_by").order_by("-number")


def dataset_runs(*, dataset: Dataset) -> QuerySet[ExportRun]:
    """A dataset's export runs, newest first, with what each made or matched."""
    return dataset.runs.select_related("version", "matched_version", "requested_by").order_by("-created_at", "-id")


def dataset_latest_run(*, dataset: Dataset) -> ExportRun | None:
    return dataset_runs(dataset=dataset).first()


def version_get(*, dataset: Dataset, number: int) -> DatasetVersion | None:
    return dataset.versions.filter(number=number).first()


def filter_choices() -> dict:
    """What the dataset form offers: categories, open areas, versions, variants and sources that exist."""
    from feedback.models import Source

    values = FeedbackItem.objects.order_by()
    return {
        "categories": list(
            Category.objects.exclude(status=Category.Status.MERGED).only("id", "name", "status").order_by("name")
        ),
        "areas": list(area_choices()),
        "model_versions": sorted(v for v in values.values_list("model_version", flat=True).distinct() if v),
        "variants": sorted(v for v in values.values_list("variant", flat=True).distinct() if v),
        "sources": list(Source.objects.only("id", "slug", "name").order_by("name")),
    }


FILTER_LABELS = {
    "categories": "Categories",
    "areas": "Areas",
    "verdicts": "Verdicts",
    "tags": "Tags (any)",
    "rating": "Rating",
    "kinds": "Kinds",
    "model_versions": "Model versions",
    "variants": "Variants",
    "sources": "Sources",
    "date_from": "From",
    "date_to": "To",
    "reviewed_only": "Reviewer-confirmed only",
    "has_hint": "Has a coaching hint",
    "has_corrected_response": "Has a corrected response",
}


def filters_described(*, filters: dict) -> list[tuple[str, str]]:
    """The stored filters as (label, text) lines for the pages; category and area ids become names."""
    names = {}
    if filters.get("categories"):
        names = dict(Category.objects.filter(id__in=filters["categories"]).values_list("id", "name"))
    area_names = {}
    if filters.get("areas"):
        area_names = dict(Area.objects.filter(id__in=filters["areas"]).values_list("id", "name"))
    lines = []
    for key, label in FILTER_LABELS.items():
        value = filters.get(key)
        if value in (None, False, []):
            continue
        if key == "categories":
            text = ", ".join(names.get(category_id, f"#{category_id} (gone)") for category_id in value)
        elif key == "areas":
            text = ", ".join(area_names.get(area_id, f"#{area_id} (gone)") for area_id in value)
        elif isinstance(value, list):
            text = ", ".join(str(part) for part in value)
        elif value is True:
            text = "yes"
        else:
            text = str(value)
        lines.append((label, text))
    return lines
