"""Reads for the exports: which items a dataset takes, datasets, versions and their diffs."""

import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from itertools import islice
from pathlib import Path
from time import monotonic

from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast

from exports.formats import WRITERS
from exports.member_states import text_hash
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


# --- Which items a dataset takes ---------------------------------------------------


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


# --- Datasets and versions ---------------------------------------------------------


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


@dataclass
class FieldChange:
    """One field of an item that differs between two versions, as the page shows it."""

    name: str
    old: str
    new: str
    # Hint and corrected response: True when `old`/`new` is the text itself (the
    # item's current text has the hash that version recorded), not a description.
    old_is_text: bool = False
    new_is_text: bool = False


@dataclass
class MemberChange:
    item_id: int
    item: FeedbackItem | None
    fields: list[FieldChange]


@dataclass
class FileRows:
    name: str
    old_rows: int | None
    new_rows: int | None


@dataclass
class VersionDiff:
    old: DatasetVersion
    new: DatasetVersion
    added_count: int
    removed_count: int
    kept_count: int
    # (item id, the item or None when it was deleted since), the first `limit` by id.
    added: list[tuple[int, FeedbackItem | None]]
    removed: list[tuple[int, FeedbackItem | None]]
    # Rows per data file in each version (None: the version has no such file).
    files: list[FileRows]
    # False when either version was made before members recorded their exported state.
    changes_known: bool
    changed_count: int = 0
    # Items in both versions whose field differs, per field name.
    changed_by_field: dict[str, int] = field(default_factory=dict)
    # The first `limit` changed items by id.
    changed: list[MemberChange] = field(default_factory=list)
    # When the first version with recorded states was made (None: none yet).
    recorded_since: datetime | None = None


# (shown name, DatasetVersionItem column) of what a diff compares, in page order.
DIFF_FIELDS = (
    ("category", "category_id"),
    ("area", "area_id"),
    ("verdict", "verdict"),
    ("split", "split"),
    ("hint", "hint_hash"),
    ("corrected response", "corrected_response_hash"),
)
TEXT_FIELDS = {"hint": "hint", "corrected response": "corrected_response"}


def _members_with_items(members: QuerySet[DatasetVersionItem], limit: int) -> list[tuple[int, FeedbackItem | None]]:
    ids = list(members.order_by("item_id").values_list("item_id", flat=True)[:limit])
    return _with_items(ids)


def _with_items(ids: list[int]) -> list[tuple[int, FeedbackItem | None]]:
    shown = ("id", "kind", "rating", "title", "comment", "model_version", "source__slug")
    items = FeedbackItem.objects.select_related("source").only(*shown).in_bulk(ids)
    return [(item_id, items.get(item_id)) for item_id in ids]


def _files_rows(old: DatasetVersion, new: DatasetVersion) -> list[FileRows]:
    def rows(version: DatasetVersion) -> dict[str, int | None]:
        return {entry["name"]: entry.get("rows") for entry in version.files if entry.get("format") != "card"}

    old_rows, new_rows = rows(old), rows(new)
    names = sorted(old_rows.keys() | new_rows.keys())
    return [FileRows(name, old_rows.get(name), new_rows.get(name)) for name in names]


def _changed_members_sql(select: str, *, tail: str = "") -> str:
    """Members of both versions with some recorded field different; parameters: old version, new version."""
    quote = connection.ops.quote_name
    table = quote(DatasetVersionItem._meta.db_table)
    # NULL means "none" here, and none to something is a change: a NULL-safe comparison.
    distinct = "IS DISTINCT FROM" if connection.vendor == "postgresql" else "IS NOT"
    differs = " OR ".join(f"o.{quote(column)} {distinct} n.{quote(column)}" for _, column in DIFF_FIELDS)
    return (
        f"SELECT {select} FROM {table} n JOIN {table} o ON o.item_id = n.item_id AND o.version_id = %s"
        f" WHERE n.version_id = %s AND ({differs}){tail}"
    )


def _changed_counts(old: DatasetVersion, new: DatasetVersion) -> tuple[int, dict[str, int]]:
    quote = connection.ops.quote_name
    distinct = "IS DISTINCT FROM" if connection.vendor == "postgresql" else "IS NOT"
    sums = ", ".join(
        f"SUM(CASE WHEN o.{quote(column)} {distinct} n.{quote(column)} THEN 1 ELSE 0 END)" for _, column in DIFF_FIELDS
    )
    with connection.cursor() as cursor:
        cursor.execute(_changed_members_sql(f"COUNT(*), {sums}"), [old.id, new.id])
        total, *per_field = cursor.fetchone()
    by_field = {name: int(count or 0) for (name, _), count in zip(DIFF_FIELDS, per_field, strict=True)}
    return int(total or 0), {name: count for name, count in by_field.items() if count}


def _changed_rows(old: DatasetVersion, new: DatasetVersion, limit: int) -> list[tuple]:
    """(item id, (old, new) per DIFF_FIELDS) of the first `limit` changed members by id."""
    quote = connection.ops.quote_name
    select = ", ".join(["n.item_id"] + [f"o.{quote(c)}, n.{quote(c)}" for _, c in DIFF_FIELDS])
    with connection.cursor() as cursor:
        cursor.execute(_changed_members_sql(select, tail=" ORDER BY n.item_id LIMIT %s"), [old.id, new.id, limit])
        return [(row[0], list(zip(row[1::2], row[2::2], strict=True))) for row in cursor.fetchall()]


def _current_texts(item_ids: list[int]) -> dict[int, dict[str, str]]:
    """The hint and corrected response each item would be exported with now, scrubbed as an export scrubs them."""
    from feedback import custom_patterns

    items = FeedbackItem.objects.filter(id__in=item_ids)
    texts = {}
    for records in records_stream(items, with_vector=False, extra_patterns=custom_patterns.all_sources()):
        for record in records:
            texts[record.id] = {"hint": record.hint, "corrected_response": record.corrected_response}
    return texts


def _shown(name: str, value, *, names: dict[str, dict[int, str]]) -> str:
    if name in ("category", "area"):
        if value is None:
            return "none"
        return names[name].get(value, f"#{value} (deleted since)")
    if name == "verdict":
        return Label.Verdict(value).label if value in Label.Verdict.values else (value or "not reviewed")
    if value is None:
        return "not reviewed"
    return "no split" if value == Label.Split.NONE else value


def _text_shown(value: int | None, current: str, *, unknown: str) -> tuple[str, bool]:
    """A recorded text hash as shown: the text itself when the item still has it, else what is known."""
    if value is None:
        return "none", False
    if current and text_hash(current) == value:
        return current, True
    return unknown, False


def _member_changes(rows: list[tuple]) -> list[MemberChange]:
    """The changed rows with names and texts resolved: four queries for the whole page, whatever its length."""
    wanted: dict[str, set[int]] = {"category": set(), "area": set()}
    text_ids = []
    for item_id, pairs in rows:
        for (name, _), (before, after) in zip(DIFF_FIELDS, pairs, strict=True):
            if name in wanted:
                wanted[name].update(value for value in (before, after) if value is not None)
            elif name in TEXT_FIELDS and before != after:
                text_ids.append(item_id)
    names = {
        "category": dict(Category.objects.filter(id__in=wanted["category"]).values_list("id", "name")),
        "area": dict(Area.objects.filter(id__in=wanted["area"]).values_list("id", "name")),
    }
    texts = _current_texts(text_ids) if text_ids else {}
    items = dict(_with_items([item_id for item_id, _ in rows]))
    changes = []
    for item_id, pairs in rows:
        fields = []
        for (name, _), (before, after) in zip(DIFF_FIELDS, pairs, strict=True):
            if before == after:
                continue
            if name in TEXT_FIELDS:
                current = texts.get(item_id, {}).get(TEXT_FIELDS[name], "")
                old, old_is_text = _text_shown(before, current, unknown="earlier text")
                new, new_is_text = _text_shown(after, current, unknown="a text changed since")
                fields.append(FieldChange(name, old, new, old_is_text=old_is_text, new_is_text=new_is_text))
            else:
                fields.append(FieldChange(name, _shown(name, before, names=names), _shown(name, after, names=names)))
        changes.append(MemberChange(item_id=item_id, item=items.get(item_id), fields=fields))
    return changes


def version_diff(*, old: DatasetVersion, new: DatasetVersion, limit: int = 200) -> VersionDiff:
    """Items added, removed and changed from one version to another (counts, and the first `limit` of each),
    with the rows of every data file in both.

    Computed on the recorded members, so an item deleted since still counts.
    A change is a difference in what the two versions recorded per member;
    versions made before members recorded that cannot say, and the diff says so.
    """
    old_ids = DatasetVersionItem.objects.filter(version=old).values("item_id")
    new_ids = DatasetVersionItem.objects.filter(version=new).values("item_id")
    added = DatasetVersionItem.objects.filter(version=new).exclude(item_id__in=old_ids)
    removed = DatasetVersionItem.objects.filter(version=old).exclude(item_id__in=new_ids)
    added_count, removed_count = added.count(), removed.count()
    diff = VersionDiff(
        old=old,
        new=new,
        added_count=added_count,
        removed_count=removed_count,
        kept_count=new.item_count - added_count,
        added=_members_with_items(added, limit),
        removed=_members_with_items(removed, limit),
        files=_files_rows(old, new),
        changes_known=old.members_recorded and new.members_recorded,
    )
    if diff.changes_known:
        diff.changed_count, diff.changed_by_field = _changed_counts(old, new)
        diff.changed = _member_changes(_changed_rows(old, new, limit)) if diff.changed_count else []
    else:
        recorded = DatasetVersion.objects.filter(members_recorded=True).order_by("created_at")
        diff.recorded_since = recorded.values_list("created_at", flat=True).first()
    return diff


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


# --- The dataset builder's preview -------------------------------------------------

PREVIEW_SAMPLE_SIZE = 5
# The preview reads at most this many candidate items, and stops sooner when its
# time is up, so a filter that matches 100,000 items still answers within a
# couple of seconds; the page then says "at least" instead of guessing.
PREVIEW_MAX_ITEMS = 20_000
PREVIEW_SECONDS = 1.2
PREVIEW_CHUNK = 500


@dataclass
class FormatPreview:
    format_name: str
    file_name: str
    rows: int
    # Why the file would be empty; "" when it gets rows.
    empty_reason: str


@dataclass
class DatasetPreview:
    # Items the query selects before each item's latest label is checked.
    candidates: int
    # Candidates read within the preview's limits.
    scanned: int
    # Of those read, the items that pass every filter: what an export takes before the held-out check.
    matched: int
    # All items that match, when the query alone decides it (no filter on labels): exact even if not all were read.
    matched_total: int | None
    formats: list[FormatPreview]
    sample: list[ExportRecord]
    warnings: list[str]

    @property
    def complete(self) -> bool:
        """Every candidate was read, so the counts are exact (before the held-out check)."""
        return self.scanned >= self.candidates


# The filters decided on each item's latest label, after the query: with none of them, the query's count is exact.
LABEL_FILTERS = ("reviewed_only", "verdicts", "has_hint", "has_corrected_response", "tags", "categories")


def _empty_reason(writer, *, matched: int) -> str:
    if matched == 0:
        return "no item matches the filters"
    # The writer knows why it skipped the records it was given, with how many of each.
    return writer.empty_reason or "no item has what this format needs"


def _train_warnings(*, matched: int, uncorrected_downs: int, chat_rows: int | None, formats: list[str]) -> list[str]:
    """What a train set of thumbs-down items without corrections will and will not hold.

    A chat row ends only in a response someone vouched for (the chat writer's
    rule), so the chat file's row count is the number of items that qualify.
    """
    if not uncorrected_downs or chat_rows is None:
        return []
    negative_formats = [name for name in WRITERS if "kto" in name]
    holder = next((name for name in negative_formats if name in formats), None)
    if holder:
        rest = f"{holder} rows will hold them as negative examples"
    elif negative_formats:
        rest = f"choose {negative_formats[0]} to keep them as negative examples"
    else:
        rest = "add corrected responses to train on them"
    return [
        f"chat rows need a corrected response or a thumbs-up: {chat_rows} of {matched} items qualify; "
        f"{uncorrected_downs} thumbs-down item{'s' if uncorrected_downs != 1 else ''} without a corrected "
        f"response give no chat row, {rest}"
    ]


def dataset_preview(
    *,
    filters: StoredFilters,
    purpose: str,
    formats: list[str],
    extra_patterns: Sequence[tuple[str, str]] = (),
) -> DatasetPreview:
    """What an export with these filters would hold, before the held-out check.

    Row counts come from the real writers run over the matching records into
    a scratch folder, so they equal what an export writes; the records are
    scrubbed as every page shows them. Work stops at PREVIEW_MAX_ITEMS
    candidates or PREVIEW_SECONDS, whichever comes first.
    """
    items = items_matching(filters=filters)
    candidates = items.count()
    category_ids = categories_with_merged(filters.categories)
    chosen = [name for name in WRITERS if name in set(formats)]
    deadline = monotonic() + PREVIEW_SECONDS
    scanned = matched = uncorrected_downs = 0
    sample: list[ExportRecord] = []
    with tempfile.TemporaryDirectory(prefix="dataset-preview-") as scratch:
        writers = [WRITERS[name](Path(scratch)) for name in chosen]
        # Disputed items are left out, as an export leaves them out until they are settled.
        stream = records_stream(
            items,
            with_vector=False,
            extra_patterns=extra_patterns,
            chunk_size=min(PREVIEW_CHUNK, PREVIEW_MAX_ITEMS),
            disputed=[],
        )
        try:
            for records in stream:
                records = records[: PREVIEW_MAX_ITEMS - scanned]
                scanned += len(records)
                kept = [record for record in records if record_passes(record, filters, category_ids=category_ids)]
                matched += len(kept)
                uncorrected_downs += sum(1 for r in kept if r.rating == -1 and not r.corrected_response.strip())
                sample.extend(kept[: PREVIEW_SAMPLE_SIZE - len(sample)])
                for writer in writers:
                    writer.write(kept)
                if scanned >= PREVIEW_MAX_ITEMS or monotonic() > deadline:
                    break
        finally:
            # Closing the stream ends its server-side cursor; closing the writers runs what they write at the end.
            stream.close()
            for writer in writers:
                writer.close()
    rows = {writer.format_name: writer.rows for writer in writers}
    previews = [
        FormatPreview(
            format_name=writer.format_name,
            file_name=writer.file_name,
            rows=writer.rows,
            empty_reason="" if writer.rows else _empty_reason(writer, matched=matched),
        )
        for writer in writers
    ]
    warnings = []
    if purpose == Purpose.TRAIN:
        warnings = _train_warnings(
            matched=matched,
            uncorrected_downs=uncorrected_downs,
            chat_rows=rows.get("chat_jsonl"),
            formats=chosen,
        )
    by_query_alone = not any(getattr(filters, name) for name in LABEL_FILTERS)
    return DatasetPreview(
        candidates=candidates,
        scanned=scanned,
        matched=matched,
        matched_total=candidates if by_query_alone else None,
        formats=previews,
        sample=sample,
        warnings=warnings,
    )


def builder_choices() -> dict:
    """What the dataset builder offers: filter_choices(), with the categories grouped by area for the picker.

    category_groups: [(area name or None, [categories by name])], areas by name and
    "no area" last; merged categories are left out, as their items went to another.
    """
    categories = (
        Category.objects.exclude(status=Category.Status.MERGED)
        .select_related("area")
        .only("id", "name", "status", "size", "area__name")
        .order_by("name", "id")
    )
    # Keyed by area id: two areas may share a name and still are two groups.
    groups: dict[int | None, tuple[str | None, list[Category]]] = {}
    for category in categories:
        name = category.area.name if category.area_id else None
        groups.setdefault(category.area_id, (name, []))[1].append(category)
    ordered = sorted(groups.values(), key=lambda group: (group[0] is None, (group[0] or "").lower()))
    return {**filter_choices(), "category_groups": ordered}
