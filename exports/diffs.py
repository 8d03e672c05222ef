"""What changed between two versions of a dataset: items added, removed and changed (category,
area, verdict, hint, corrected response, split), and each file's rows in both."""

from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.db.models import QuerySet

from exports.member_states import text_hash
from exports.models import (
    DatasetVersion,
    DatasetVersionItem,
)
from exports.selectors import records_stream
from feedback.models import FeedbackItem
from labeling.models import Area, Category, Label


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
