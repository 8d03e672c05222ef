"""The dataset builder's preview, as the filters change: how many items match, how many rows each
format would get and why one would be empty, a sample of five, and warnings about a train set."""

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from time import monotonic

from exports.formats import WRITERS
from exports.models import (
    Purpose,
)
from exports.records import (
    ExportRecord,
)
from exports.schemas import StoredFilters
from exports.selectors import (
    categories_with_merged,
    filter_choices,
    items_matching,
    record_passes,
    records_stream,
)
from labeling.models import Category

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
