"""Keyset pages of items listed newest first, by (occurred_at, id).

A page is found from the last (or first) item of its neighbour, never by
OFFSET: the database walks the `feedback_item_occurred` index from that point,
so the 500th page costs what the first does, and an item that arrives while a
reviewer pages on neither shifts what they see nor appears twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db.models import Q, QuerySet

from core.ordering import earlier_than, later_than

PAGE_SIZE = 50

# "20261202T101010.123456Z_123": the item's occurred_at in UTC, then its id.
_CURSOR = re.compile(r"(\d{8}T\d{6}\.\d{6})Z_([1-9]\d{0,17})", re.ASCII)  # ASCII: no other script's digits


@dataclass
class KeysetPage:
    """One page: its items, the total count, and the cursors of the pages beside it."""

    items: list = field(default_factory=list)
    count: int = 0
    newer: str | None = None  # `before=` of the previous page, nearer the newest
    older: str | None = None  # `after=` of the next page
    at_start: bool = True

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def cursor_of(item) -> str:
    return f"{item.occurred_at.astimezone(UTC).strftime('%Y%m%dT%H%M%S.%f')}Z_{item.id}"


def cursor_parse(text: str) -> tuple[datetime, int] | None:
    """(occurred_at, id) of a cursor, or None when it is not one (edited, truncated, another format)."""
    match = _CURSOR.fullmatch(text or "")
    if not match:
        return None
    try:
        moment = datetime.strptime(match.group(1), "%Y%m%dT%H%M%S.%f").replace(tzinfo=UTC)
    except ValueError:  # month 13, day 32...
        return None
    return moment, int(match.group(2))


def page_number_parse(text: str | None) -> int:
    """A `page=` number as a link or a person wrote it; anything else is the first page, as Paginator.get_page does."""
    return int(text) if text and text.isascii() and text.isdigit() and len(text) < 10 else 1


def _older_than(at: tuple[datetime, int], *, inclusive: bool = False) -> Q:
    return earlier_than("occurred_at", *at, inclusive=inclusive)


def _newer_than(at: tuple[datetime, int], *, inclusive: bool = False) -> Q:
    return later_than("occurred_at", *at, inclusive=inclusive)


def keyset_page(
    items: QuerySet,
    *,
    after: tuple[datetime, int] | None = None,
    before: tuple[datetime, int] | None = None,
    page_number: int = 1,
    size: int = PAGE_SIZE,
    count: int | None = None,
) -> KeysetPage:
    """The page of `items` (ordered newest first) just older than `after`, or just newer than `before`.

    Without a cursor, page `page_number` counted from the newest (an OFFSET,
    for links from before cursors existed). A `before` page that reaches the
    newest item is the first page, full. `count`: how many `items` are, when
    the caller knows it without counting them.
    """
    newest_first = items.order_by("-occurred_at", "-id")
    count = newest_first.count() if count is None else count
    if before is not None:
        rows = list(newest_first.filter(_newer_than(before)).order_by("occurred_at", "id")[: size + 1])
        if len(rows) > size:
            rows = rows[:size][::-1]
            has_older = newest_first.filter(_older_than(before, inclusive=True)).exists()
            return _page(rows, count, has_newer=True, has_older=has_older)
        after, page_number = None, 1  # back at the newest: the first page, full
    if after is not None:
        rows = list(newest_first.filter(_older_than(after))[: size + 1])
        has_newer = newest_first.filter(_newer_than(after, inclusive=True)).exists()
        return _page(rows[:size], count, has_newer=has_newer, has_older=len(rows) > size)
    offset = (max(page_number, 1) - 1) * size
    if offset >= count:
        offset = max(count - 1, 0) // size * size  # past the end: the last page
    if not offset:
        rows = list(newest_first[: size + 1])
        return _page(rows[:size], count, has_newer=False, has_older=len(rows) > size)
    # The ids first, then their rows: the database skips `offset` bare ids instead of
    # building every skipped row with its annotations (448 ms for page 500 at 100,000 items).
    ids = list(newest_first.values_list("id", flat=True)[offset : offset + size + 1])
    found = newest_first.in_bulk(ids)
    rows = [found[item_id] for item_id in ids if item_id in found]
    return _page(rows[:size], count, has_newer=True, has_older=len(ids) > size)


def _page(rows: list, count: int, *, has_newer: bool, has_older: bool) -> KeysetPage:
    return KeysetPage(
        items=rows,
        count=count,
        newer=cursor_of(rows[0]) if has_newer and rows else None,
        older=cursor_of(rows[-1]) if has_older and rows else None,
        at_start=not has_newer,
    )
