"""What a comparison compares: its two sides, its date window and buckets, parsed from a query
with one clear error per bad field; and the versions a form offers."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from urllib.parse import urlencode

from django.db.models import Q
from django.utils import timezone

from labeling import counts

DEFAULT_WINDOW_DAYS = 90
# Longer windows are drawn by week: a daily line over a year is unreadable.
MAX_DAILY_BUCKETS = 31
MAX_DAILY_BUCKETS_ASKED = 366
_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
# The days a comparison may cover: wider than any feedback, and far enough inside what
# `date` can hold that a window's arithmetic (its default start, the day after its end,
# the Mondays of its weeks, midnight in the local time zone) never overflows.
EARLIEST_DATE = date(1970, 1, 1)
LATEST_DATE = date(2999, 12, 31)


class CompareError(Exception):
    """A comparison that cannot be made: the status, a message a person understands, the field."""

    def __init__(self, status: int, message: str, field: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a model version, or one variant of it."""

    version: str
    variant: str = ""

    @property
    def spec(self) -> str:
        return f"{self.version}:{self.variant}" if self.variant else self.version

    @property
    def label(self) -> str:
        return f"{self.version} · {self.variant}" if self.variant else self.version

    def condition(self, prefix: str = "") -> Q:
        """The items of this side, as a filter (`prefix`: the path to the item, e.g. "item__")."""
        condition = Q(**{f"{prefix}model_version": self.version})
        if self.variant:
            condition &= Q(**{f"{prefix}variant": self.variant})
        return condition

    def matches(self, version: str, variant: str) -> bool:
        return version == self.version and (not self.variant or variant == self.variant)

    def overlaps(self, other: Side) -> bool:
        if self.version != other.version:
            return False
        return not self.variant or not other.variant or self.variant == other.variant


@dataclass(frozen=True)
class CompareParams:
    a: Side
    b: Side
    date_from: date
    date_to: date
    bucket: str  # "day" | "week"

    @property
    def days(self) -> int:
        return (self.date_to - self.date_from).days + 1

    def query(self) -> dict[str, str]:
        return {"a": self.a.spec, "b": self.b.spec, "from": self.date_from.isoformat(), "to": self.date_to.isoformat()}

    @property
    def url(self) -> str:
        return "/compare/?" + urlencode(self.query())

    @property
    def api_json_url(self) -> str:
        return "/api/v1/compare?" + urlencode(self.query())

    @property
    def api_csv_url(self) -> str:
        return "/api/v1/compare?" + urlencode(self.query() | {"format": "csv"})


def _parse_date(value: str, *, field: str) -> date | None:
    value = value.strip()
    if not value:
        return None
    try:
        if not _DATE.match(value):
            raise ValueError
        day = date.fromisoformat(value)
    except ValueError:
        raise CompareError(422, f"{field}: '{value}' is not a date; use YYYY-MM-DD", field) from None
    date_in_range(day, field=field)
    return day


def date_in_range(day: date, *, field: str) -> None:
    if not EARLIEST_DATE <= day <= LATEST_DATE:
        raise CompareError(
            422, f"{field}: {day} is outside the dates a comparison covers, {EARLIEST_DATE} to {LATEST_DATE}", field
        )


def default_start(end: date) -> date:
    return max(EARLIEST_DATE, end - timedelta(days=DEFAULT_WINDOW_DAYS - 1))


def _known_pairs(specs: Iterable[str]) -> set[tuple[str, str]]:
    """(version, variant) pairs that exist among the versions the specs could name; one query."""
    versions = set()
    for spec in specs:
        versions.add(spec)
        if ":" in spec:
            versions.add(spec.rsplit(":", 1)[0])
    return set(counts.counted(("model_version", "variant"), Q(model_version__in=versions)))


def _resolve_side(spec: str, *, known: set[tuple[str, str]], field: str) -> Side:
    # The whole spec as a version first, so a version that itself holds ":" still works.
    if any(version == spec for version, _ in known):
        return Side(spec)
    if ":" in spec:
        version, variant = spec.rsplit(":", 1)
        if (version, variant) in known:
            return Side(version, variant)
        if any(v == version for v, _ in known):
            raise CompareError(404, f"{field}: version '{version}' has no variant '{variant}'", field)
    raise CompareError(404, f"{field}: no feedback for model version '{spec}'", field)


def compare_params_from_query(query) -> CompareParams:
    """compare_params_parse over a query string or a posted form (keys a, b, from, to)."""
    return compare_params_parse(
        a=query.get("a", ""), b=query.get("b", ""), date_from=query.get("from", ""), date_to=query.get("to", "")
    )


def compare_params_parse(
    *, a: str, b: str, date_from: str = "", date_to: str = "", bucket: str = "", today: date | None = None
) -> CompareParams:
    """Checks, in order, each stopping at the first problem: presence, dates, bucket, a == b, known sides, overlap."""
    a, b = a.strip(), b.strip()
    if not a:
        raise CompareError(422, "a: pick the baseline model version (a)", "a")
    if not b:
        raise CompareError(422, "b: pick the model version to compare with it (b)", "b")
    start = _parse_date(date_from, field="from")
    end = _parse_date(date_to, field="to")
    today = today or timezone.localdate()
    end = end or max(today, start or today)
    start = start or default_start(end)
    if start > end:
        raise CompareError(422, f"to: the end date {end} is before the start date {start}", "to")
    days = (end - start).days + 1
    bucket = bucket.strip() or ("day" if days <= MAX_DAILY_BUCKETS else "week")
    if bucket not in ("day", "week"):
        raise CompareError(422, "bucket: must be 'day' or 'week'", "bucket")
    if bucket == "day" and days > MAX_DAILY_BUCKETS_ASKED:
        raise CompareError(422, f"bucket: daily buckets go up to {MAX_DAILY_BUCKETS_ASKED} days; use 'week'", "bucket")
    if a == b:
        raise CompareError(422, "b: compare two different versions or variants; a and b are the same", "b")
    known = _known_pairs([a, b])
    side_a = _resolve_side(a, known=known, field="a")
    side_b = _resolve_side(b, known=known, field="b")
    if side_a == side_b:
        raise CompareError(422, "b: compare two different versions or variants; a and b are the same", "b")
    if side_a.overlaps(side_b):
        # A version against one of its own variants shares ratings: the test needs independent samples.
        raise CompareError(422, f"b: {side_b.label} is part of {side_a.label}; compare two variants of it instead", "b")
    return CompareParams(a=side_a, b=side_b, date_from=start, date_to=end, bucket=bucket)


@dataclass(frozen=True)
class DataWindow:
    """The days a comparison covers when no dates are given: where both sides have ratings."""

    date_from: date
    date_to: date
    # False when the two sides never had ratings on the same days: the window then spans both.
    overlap: bool


def data_window(*, a: str, b: str, spans: dict | None = None) -> DataWindow | None:
    """From the later first rating of the two sides to the earlier last one, in days; two queries.

    None when a side is unknown or has no ratings (the usual default and the page's
    errors take over). Sides that never overlap get the span of both, marked so.
    `spans`: `labeling.counts.rated_spans()` when the caller has read it already.
    """
    a, b = a.strip(), b.strip()
    if not a or not b or a == b:
        return None
    known = _known_pairs([a, b])
    try:
        sides = {"a": _resolve_side(a, known=known, field="a"), "b": _resolve_side(b, known=known, field="b")}
    except CompareError:
        return None
    spans = counts.rated_spans() if spans is None else spans
    day = {}
    for key, side in sides.items():
        matching = [span for (version, variant), span in spans.items() if side.matches(version, variant)]
        if not matching:
            return None
        # Clamped to the days any comparison covers, however odd a product's clock was.
        day[f"{key}_first"] = min(max(min(first for first, _ in matching), EARLIEST_DATE), LATEST_DATE)
        day[f"{key}_last"] = min(max(max(last for _, last in matching), EARLIEST_DATE), LATEST_DATE)
    start, end = max(day["a_first"], day["b_first"]), min(day["a_last"], day["b_last"])
    if start <= end:
        return DataWindow(date_from=start, date_to=end, overlap=True)
    return DataWindow(date_from=min(day["a_first"], day["b_first"]), date_to=max(day["a_last"], day["b_last"]), overlap=False)


_VERSION_NUMBER = re.compile(r"([0-9]+)")


def version_key(version: str) -> tuple:
    # "2.10" after "2.9": compare the runs of ASCII digits as numbers. Only those: a version
    # is whatever a product sent, and "²" or "٣" pass str.isdigit() but int() refuses the first.
    return tuple(
        (0, int(part), "") if _VERSION_NUMBER.fullmatch(part) else (1, 0, part)
        for part in _VERSION_NUMBER.split(version)
        if part
    )


def side_choices(*, spans: dict | None = None) -> dict:
    """Versions and version:variant pairs with ratings, newest version first, and a default pair; one query.

    The default pair is the two versions rated last (by day, from the daily counts; a tie goes to the higher version).
    `spans`: `labeling.counts.rated_spans()` when the caller has read it already.
    """
    versions: dict[str, set[str]] = defaultdict(set)
    last_seen: dict[str, date] = {}
    for (version, variant), (_, last) in (counts.rated_spans() if spans is None else spans).items():
        if not version:
            continue
        versions[version].update([variant] if variant else [])
        last_seen[version] = max(last_seen.get(version, last), last)
    ordered = sorted(versions, key=version_key, reverse=True)
    options = []
    for version in ordered:
        options.append((version, f"{version} (all variants)" if versions[version] else version))
        options.extend(
            (Side(version, variant).spec, f"{version} · variant {variant}") for variant in sorted(versions[version])
        )
    by_recency = sorted(last_seen, key=lambda version: (last_seen[version], version_key(version)), reverse=True)
    default_b = by_recency[0] if by_recency else ""
    default_a = by_recency[1] if len(by_recency) > 1 else ""
    return {
        "options": options,
        "specs": [spec for spec, _ in options],
        "default_a": default_a,
        "default_b": default_b,
    }
