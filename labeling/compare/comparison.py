"""Model-version comparison: which failure areas and categories a new model made better or worse.

Two *sides* (a model version, or one variant of a version) are compared over
a date window. Side ``a`` is the baseline and side ``b`` the newer model, so a
difference is always ``b - a`` and a positive one means more thumbs-down on
``b``: a regression.

Per category the rate is *thumbs-down ratings assigned to the category /
all ratings of that side in the window* (thumbs-up and thumbs-down; reports
carry no rating and are counted as signals only). With one denominator per
side the rates of the categories add up to the side's overall thumbs-down
share that landed in a category, and a version that gets more traffic is not
penalised for it.

Areas are tested the same way, one level up: an item counts in the area its
assignment names (``Assignment.area``), which includes the area's unsorted
items. A regression spread thinly over several small categories, none of
which has enough thumbs-down to be tested, can still be found in their area.

Statistics (no scipy needed, and every figure is reproducible by hand):

- interval of one rate: Wilson score interval;
- interval of a difference: Newcombe's hybrid score interval (method 10),
  which, unlike the Wald interval, stays inside [-1, 1] and behaves with
  zero counts, which new and vanished categories always have;
- flag: two-sided pooled two-proportion z-test, p-values corrected with Holm
  over the categories tested, and separately over the areas tested (each
  level is its own family), significant below ``ALPHA``.

The API's answer and the pinned comparisons also carry a row per rollout
check (rollouts.compare: the share of each side's checked rollouts a check
flagged), tested the same way as a third family.

Reads run as one aggregate query (day x version x variant x kind x rating x
category x area, the area's name joined in) plus one for the category names,
whatever the number of categories, areas or pinned comparisons.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from django.db.models import Q
from django.utils import timezone

from core.csvcells import spreadsheet_safe
from feedback.models import FeedbackItem
from labeling import counts
from labeling.models import Area, Category, SavedComparison

if TYPE_CHECKING:
    # rollouts builds on labeling (rollouts.compare imports this module): at run time it is
    # imported inside the functions that need its rows per check.
    from rollouts.compare import CheckRow

Z95 = 1.959963984540054  # the 97.5% point of the standard normal: 95% two-sided
ALPHA = 0.05
# The z-test leans on the normal approximation; below these counts it is not
# trusted and the category is shown but never flagged. Five expected events
# per side under the pooled rate is the textbook rule for a 2x2 table.
MIN_EXPECTED = 5
MIN_DOWN_TOTAL = 10
DEFAULT_WINDOW_DAYS = 90
# Longer windows are drawn by week: a daily line over a year is unreadable.
MAX_DAILY_BUCKETS = 31
MAX_DAILY_BUCKETS_ASKED = 366
MAX_PINS_ON_OVERVIEW = 10
DENOMINATOR = (
    "Rate = thumbs-down ratings assigned to the category (or filed under the area, its unsorted ones "
    "included) / all ratings (up and down) of that side in the date range. Reports count as signals, "
    "not in the rates."
)
CHECKS_DENOMINATOR = (
    "Rate = the side's rollouts (items with tool calls, checked) with a standing flag of the check (pending or "
    "confirmed; a dismissed flag does not count) / all the side's checked rollouts in the date range."
)
_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
# The days a comparison may cover: wider than any feedback, and far enough inside what
# `date` can hold that a window's arithmetic (its default start, the day after its end,
# the Mondays of its weeks, midnight in the local time zone) never overflows.
EARLIEST_DATE = date(1970, 1, 1)
LATEST_DATE = date(2999, 12, 31)


# --- Statistics ---------------------------------------------------------------------------


def wilson_interval(*, successes: int, total: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion; (0, 1) when there is nothing to go on."""
    if total <= 0:
        return 0.0, 1.0
    p = successes / total
    z2 = z * z
    denominator = 1 + z2 / total
    centre = (p + z2 / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / denominator
    # At 0 and at total the bound is exactly 0 (or 1); the formula leaves rounding dust there.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == total else min(1.0, centre + half)
    return low, high


def newcombe_interval(*, x_a: int, n_a: int, x_b: int, n_b: int, z: float = Z95) -> tuple[float, float, float]:
    """``p_b - p_a`` with Newcombe's hybrid score interval: (difference, low, high)."""
    p_a, p_b = x_a / n_a, x_b / n_b
    low_a, high_a = wilson_interval(successes=x_a, total=n_a, z=z)
    low_b, high_b = wilson_interval(successes=x_b, total=n_b, z=z)
    difference = p_b - p_a
    low = difference - math.sqrt((p_b - low_b) ** 2 + (high_a - p_a) ** 2)
    high = difference + math.sqrt((high_b - p_b) ** 2 + (p_a - low_a) ** 2)
    return difference, low, high


def two_proportion_z_test(*, x_a: int, n_a: int, x_b: int, n_b: int) -> tuple[float, float]:
    """Pooled two-proportion z-test of ``p_b - p_a``: (z, two-sided p-value)."""
    pooled = (x_a + x_b) / (n_a + n_b)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    if se == 0:
        # Both sides all zero (or all one): no evidence of any difference.
        return 0.0, 1.0
    z = (x_b / n_b - x_a / n_a) / se
    return z, math.erfc(abs(z) / math.sqrt(2))


def normal_approximation_holds(*, x_a: int, n_a: int, x_b: int, n_b: int) -> bool:
    """Enough events for the z-test: a minimum total, and the expected counts rule on both sides."""
    if n_a <= 0 or n_b <= 0 or x_a + x_b < MIN_DOWN_TOTAL:
        return False
    pooled = (x_a + x_b) / (n_a + n_b)
    return min(n_a, n_b) * min(pooled, 1 - pooled) >= MIN_EXPECTED


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda index: p_values[index])
    adjusted = [1.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        # max() keeps the adjusted values monotone, as the step-down procedure stops at the first failure.
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


# --- Parameters ---------------------------------------------------------------------------


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
    _date_in_range(day, field=field)
    return day


def _date_in_range(day: date, *, field: str) -> None:
    if not EARLIEST_DATE <= day <= LATEST_DATE:
        raise CompareError(
            422, f"{field}: {day} is outside the dates a comparison covers, {EARLIEST_DATE} to {LATEST_DATE}", field
        )


def _default_start(end: date) -> date:
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
    start = start or _default_start(end)
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


# --- Reading the counts ------------------------------------------------------------------


def _sides_match(sides: Iterable[Side]) -> Q:
    match = Q(pk__in=[])
    for side in set(sides):
        match |= side.condition()
    return match


def _daily_counts(*, sides: Iterable[Side], date_from: date, date_to: date, by_day: bool = True) -> list[dict]:
    """Counts by day, version, variant, kind, rating, category and area for the given sides.

    Read from the pre-aggregated daily counts (labeling.counts): two queries,
    the counts and the names of their areas, whatever the number of items.
    With `by_day` false the window's days are summed in the database (each
    row's "day" is None): what one comparison's figures need, in far fewer rows.
    """
    group_by = counts.DAILY_KEY if by_day else counts.KEY
    found = counts.counted(group_by, _sides_match(sides) & Q(day__gte=date_from, day__lte=date_to), daily=True)
    area_ids = {key[-1] for key in found if key[-1]}
    areas = {area.id: area for area in Area.objects.filter(id__in=area_ids).only("id", "name", "status")} if area_ids else {}
    rows = []
    for key, n in found.items():
        day, (kind, rating, model_version, variant, category_id, area_id) = (key[0], key[1:]) if by_day else (None, key)
        area = areas.get(area_id)
        rows.append({
            "day": day, "model_version": model_version, "variant": variant, "kind": kind,
            "rating": rating or None, "assignment__category_id": category_id or None,
            "assignment__area_id": area.id if area else None,
            "assignment__area__name": area.name if area else None,
            "assignment__area__status": area.status if area else None,
            "n": n,
        })
    return rows


def _series_rows(*, params: CompareParams) -> list[tuple[str, dict]]:
    """(side, row) per day, version, variant and rating of the two sides' ratings: what the series draws; one query."""
    found = counts.counted(
        ("day", "model_version", "variant", "rating"),
        _sides_match((params.a, params.b)) & Q(day__gte=params.date_from, day__lte=params.date_to)
        & Q(kind=FeedbackItem.Kind.RATING, rating__in=(1, -1)),
        daily=True,
    )
    rows = []
    for (day, model_version, variant, rating), n in found.items():
        key = "a" if params.a.matches(model_version, variant) else "b" if params.b.matches(model_version, variant) else None
        if key:
            rows.append((key, {"day": day, "model_version": model_version, "variant": variant,
                               "kind": FeedbackItem.Kind.RATING, "rating": rating, "n": n}))
    return rows


def _categories(rows: Iterable[dict]) -> dict[int, Category]:
    ids = {row["assignment__category_id"] for row in rows if row["assignment__category_id"]}
    if not ids:
        return {}
    found = Category.objects.filter(id__in=ids).only("id", "name", "status", "area_id")
    return {category.id: category for category in found}


# --- The comparison ------------------------------------------------------------------------


def percent(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def _signed(value: float) -> str:
    text = f"{value * 100:+.1f}"
    # A difference that rounds to nothing has no sign worth showing.
    return "0.0" if text in ("+0.0", "-0.0") else text


def points(value: float | None) -> str:
    return "–" if value is None else f"{_signed(value)} pp"


def interval_points(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f"[{_signed(low)}, {_signed(high)}]"


def format_p(value: float | None) -> str:
    if value is None:
        return "–"
    return "< 0.0001" if value < 0.0001 else f"{value:.4f}"


@dataclass
class SideSummary:
    side: Side
    ratings: int = 0
    down: int = 0
    up: int = 0
    reports: int = 0
    # Thumbs-down outside any open category: unassigned, or in an archived one.
    uncategorized_down: int = 0
    # Thumbs-down outside any open area: no area on their assignment (or a merged one).
    no_area_down: int = 0
    up_rate: float | None = None
    up_low: float | None = None
    up_high: float | None = None

    @property
    def up_rate_display(self) -> str:
        return percent(self.up_rate)

    @property
    def up_ci_display(self) -> str:
        return "" if self.up_low is None else f"[{percent(self.up_low)}, {percent(self.up_high)}]"


@dataclass(kw_only=True)
class RateRow:
    """The figures of one tested group of signals (a category or an area) on both sides."""

    name: str
    status: str
    signals_a: int = 0
    signals_b: int = 0
    down_a: int = 0
    down_b: int = 0
    rate_a: float | None = None
    rate_b: float | None = None
    difference: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    z: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    tested: bool = False
    significant: bool = False
    is_new: bool = False
    is_gone: bool = False
    items_a_url: str = ""
    items_b_url: str = ""

    # Shown on the page: rates in percent, differences in percentage points.
    @property
    def rate_a_display(self) -> str:
        return percent(self.rate_a)

    @property
    def rate_b_display(self) -> str:
        return percent(self.rate_b)

    @property
    def difference_display(self) -> str:
        return points(self.difference)

    @property
    def ci_display(self) -> str:
        return interval_points(self.ci_low, self.ci_high)

    @property
    def p_display(self) -> str:
        return format_p(self.p_adjusted if self.tested else self.p_value)

    @property
    def flag_p_display(self) -> str:
        """The p shown beside the flag: Holm-adjusted when tested, else the unadjusted one, named as such."""
        if self.tested:
            return f"adj. p {format_p(self.p_adjusted)}"
        if self.p_value is None:
            return ""
        return f"p {format_p(self.p_value)} unadjusted"

    @property
    def direction(self) -> str:
        """'worse' (more thumbs-down on b), 'better', or '' when the rates are equal or unknown."""
        if not self.difference:
            return ""
        return "worse" if self.difference > 0 else "better"

    @property
    def regression(self) -> bool:
        return self.significant and self.direction == "worse"


@dataclass(kw_only=True)
class CategoryRow(RateRow):
    category_id: int
    # The category's area (Category.area), or None: where the page lists it.
    area_id: int | None = None
    # Set when the category is listed under its area's row.
    area_name: str = ""

    @property
    def row_id(self) -> int:
        return self.category_id


@dataclass(kw_only=True)
class AreaRow(RateRow):
    """An area's figures: every signal whose Assignment.area is the area, its unsorted bucket included."""

    area_id: int
    # Signals of the area outside its open categories: its unsorted bucket (and any archived category).
    unsorted_signals_a: int = 0
    unsorted_signals_b: int = 0
    unsorted_down_a: int = 0
    unsorted_down_b: int = 0
    # Its open categories with signals in the window, in the order of the table.
    categories: list[CategoryRow] = field(default_factory=list)

    @property
    def row_id(self) -> int:
        return self.area_id

    @property
    def category_ids(self) -> list[int]:
        return [row.category_id for row in self.categories]

    @property
    def categories_ranked(self) -> list[CategoryRow]:
        """Its tested categories, most significant first (what the page lists under the area)."""
        return sorted((row for row in self.categories if row.tested), key=significance_order)

    @property
    def categories_untested(self) -> list[CategoryRow]:
        """Its categories with too few thumbs-down to test: folded under one line on the page."""
        return sorted((row for row in self.categories if not row.tested), key=significance_order)


@dataclass
class Comparison:
    params: CompareParams
    a: SideSummary
    b: SideSummary
    categories: list[CategoryRow]
    tested: int
    # The first level of the page: open areas with signals, each holding its categories.
    areas: list[AreaRow] = field(default_factory=list)
    areas_tested: int = 0
    overall_difference: float | None = None  # of the thumbs-up rate, b - a
    overall_low: float | None = None
    overall_high: float | None = None
    overall_p_value: float | None = None
    series: dict = field(default_factory=dict)
    # The rows per rollout check (rollouts.compare), when asked for: the API and the pinned comparisons.
    checks: list[CheckRow] = field(default_factory=list)

    @property
    def regressions(self) -> list[CategoryRow]:
        return [row for row in self.categories if row.regression]

    @property
    def check_regressions(self) -> list[CheckRow]:
        """The rollout checks that flag significantly more of b's rollouts."""
        return [row for row in self.checks if row.regression]

    @property
    def checks_tested(self) -> int:
        return sum(row.tested for row in self.checks)

    @property
    def area_regressions(self) -> list[AreaRow]:
        return [row for row in self.areas if row.regression]

    @property
    def area_improvements(self) -> list[AreaRow]:
        return [row for row in self.areas if row.significant and row.direction == "better"]

    @property
    def regressed(self) -> bool:
        """Anything significantly worse on b: an area, a category, or a rollout check (when its rows were read)."""
        return bool(self.area_regressions or self.regressions or self.check_regressions)

    @property
    def regressions_count(self) -> int:
        return len(self.area_regressions) + len(self.regressions) + len(self.check_regressions)

    @property
    def improvements_count(self) -> int:
        return len(self.area_improvements) + len(self.improvements)

    @property
    def areas_ranked(self) -> list[AreaRow]:
        """The tested areas, most significant first: the page's first level."""
        return sorted((row for row in self.areas if row.tested), key=significance_order)

    @property
    def areas_untested(self) -> list[AreaRow]:
        return sorted((row for row in self.areas if not row.tested), key=significance_order)

    @property
    def outside_ranked(self) -> list[CategoryRow]:
        return sorted((row for row in self.outside_areas if row.tested), key=significance_order)

    @property
    def outside_untested(self) -> list[CategoryRow]:
        return sorted((row for row in self.outside_areas if not row.tested), key=significance_order)

    @property
    def untested_categories(self) -> int:
        return sum(not row.tested for row in self.categories)

    @property
    def outside_areas(self) -> list[CategoryRow]:
        """The categories not listed under an area row: no area, or one without signals of its own here."""
        listed = {row.area_id for row in self.areas}
        return [row for row in self.categories if row.area_id not in listed]

    @property
    def regressions_heading(self) -> str:
        """'1 area and 2 categories got significantly worse' (without the side)."""
        parts = []
        if self.area_regressions:
            n = len(self.area_regressions)
            parts.append(f"{n} area{'' if n == 1 else 's'}")
        if self.regressions:
            n = len(self.regressions)
            parts.append(f"{n} categor{'y' if n == 1 else 'ies'}")
        return f"{' and '.join(parts)} got significantly worse"

    @property
    def series_rows(self) -> list[tuple[str, list[str]]]:
        """The series as table rows (bucket, one cell per line), the chart's accessible twin."""
        lines = self.series.get("lines", [])

        def cell(line: dict, index: int) -> str:
            return f"{percent(line['rate'][index])} of {line['n'][index]}" if line["n"][index] else "–"

        buckets = self.series.get("buckets", [])
        return [(bucket, [cell(line, index) for line in lines]) for index, bucket in enumerate(buckets)]

    @property
    def overall_display(self) -> str:
        return points(self.overall_difference)

    @property
    def overall_ci_display(self) -> str:
        return interval_points(self.overall_low, self.overall_high)

    @property
    def overall_p_display(self) -> str:
        return format_p(self.overall_p_value)

    @property
    def improvements(self) -> list[CategoryRow]:
        return [row for row in self.categories if row.significant and row.direction == "better"]


def items_url(
    *, side: Side, date_from: date, date_to: date, category_id: int | None = None, area_id: int | None = None
) -> str:
    """The search page, filtered to the thumbs-down of one side in one category or one area: the items
    behind a figure. An area's search holds its unsorted items too."""
    query: dict = {"category": category_id} if area_id is None else {"area": area_id}
    query |= {"model_version": side.version, "rating": "down"}
    if side.variant:
        query["variant"] = side.variant
    query |= {"date_from": date_from.isoformat(), "date_to": date_to.isoformat()}
    return "/search/?" + urlencode(query)


def _items_url(side: Side, params: CompareParams, **which: int) -> str:
    return items_url(side=side, date_from=params.date_from, date_to=params.date_to, **which)


@dataclass(frozen=True)
class AreaInfo:
    """What the comparison needs of an area; read along with the counts, not by a query of its own."""

    id: int
    name: str
    status: str

    @property
    def is_open(self) -> bool:
        return self.status in Area.OPEN_STATUSES


def _areas(rows: Iterable[dict]) -> dict[int, AreaInfo]:
    return {
        row["assignment__area_id"]: AreaInfo(
            id=row["assignment__area_id"], name=row["assignment__area__name"], status=row["assignment__area__status"]
        )
        for row in rows
        if row["assignment__area_id"]
    }


def _pair() -> dict[str, int]:
    return {"a": 0, "b": 0}


def _comparison_from_rows(
    *, params: CompareParams, rows: Iterable[dict], categories: dict[int, Category], with_series: bool = True,
    series_rows: list[tuple[str, dict]] | None = None,
) -> Comparison:
    """The comparison from counted rows; the series from `series_rows` when given (rows summed over days have no day)."""
    rows = list(rows)
    areas = _areas(rows)
    summaries = {"a": SideSummary(side=params.a), "b": SideSummary(side=params.b)}
    signals: dict[int, dict[str, int]] = defaultdict(_pair)
    downs: dict[int, dict[str, int]] = defaultdict(_pair)
    area_signals: dict[int, dict[str, int]] = defaultdict(_pair)
    area_downs: dict[int, dict[str, int]] = defaultdict(_pair)
    unsorted_signals: dict[int, dict[str, int]] = defaultdict(_pair)
    unsorted_downs: dict[int, dict[str, int]] = defaultdict(_pair)
    kept_rows = []
    for row in rows:
        if row["day"] is not None and not params.date_from <= row["day"] <= params.date_to:
            continue
        if params.a.matches(row["model_version"], row["variant"]):
            key = "a"
        elif params.b.matches(row["model_version"], row["variant"]):
            key = "b"
        else:
            continue
        kept_rows.append((key, row))
        summary, n = summaries[key], row["n"]
        category = categories.get(row["assignment__category_id"])
        in_open_category = category is not None and category.is_open
        # An item counts in the area its own assignment names, whatever its category: so an area
        # holds its unsorted bucket, and the test of the area sees every signal filed under it.
        area = areas.get(row["assignment__area_id"])
        in_open_area = area is not None and area.is_open
        if row["kind"] == FeedbackItem.Kind.REPORT:
            summary.reports += n
        elif row["rating"] in (1, -1):
            summary.ratings += n
            if row["rating"] == 1:
                summary.up += n
            else:
                summary.down += n
                if in_open_category:
                    downs[category.id][key] += n
                else:
                    summary.uncategorized_down += n
                if in_open_area:
                    area_downs[area.id][key] += n
                    if not in_open_category:
                        unsorted_downs[area.id][key] += n
                else:
                    summary.no_area_down += n
        if in_open_category:
            signals[category.id][key] += n
        if in_open_area:
            area_signals[area.id][key] += n
            if not in_open_category:
                unsorted_signals[area.id][key] += n

    for summary in summaries.values():
        if summary.ratings:
            summary.up_rate = summary.up / summary.ratings
            summary.up_low, summary.up_high = wilson_interval(successes=summary.up, total=summary.ratings)

    a, b = summaries["a"], summaries["b"]
    category_rows = [
        _category_row(
            category=categories[category_id],
            signals=signals[category_id],
            downs=downs[category_id],
            n_a=a.ratings,
            n_b=b.ratings,
            params=params,
        )
        for category_id in signals
    ]
    tested = holm_flag(category_rows)
    category_rows.sort(key=table_order)

    area_rows = [
        _area_row(
            area=areas[area_id],
            signals=area_signals[area_id],
            downs=area_downs[area_id],
            unsorted_signals=unsorted_signals[area_id],
            unsorted_downs=unsorted_downs[area_id],
            n_a=a.ratings,
            n_b=b.ratings,
            params=params,
        )
        for area_id in area_signals
    ]
    # Holm again, over the areas tested, as a family of its own. The two levels ask two
    # questions (which areas, which categories got worse), and an area's counts are the
    # sum of its categories' and its unsorted ones, so its test is not one more independent
    # hypothesis beside theirs. Pooling the families would also let the area level dilute the
    # category flags: each category's adjusted p stays what it was before areas existed.
    areas_tested = holm_flag(area_rows)
    area_rows.sort(key=table_order)
    by_area = {row.area_id: row for row in area_rows}
    for row in category_rows:
        if row.area_id in by_area:
            by_area[row.area_id].categories.append(row)
            row.area_name = by_area[row.area_id].name

    comparison = Comparison(
        params=params, a=a, b=b, categories=category_rows, tested=tested, areas=area_rows, areas_tested=areas_tested
    )
    if a.ratings and b.ratings:
        comparison.overall_difference, comparison.overall_low, comparison.overall_high = newcombe_interval(
            x_a=a.up, n_a=a.ratings, x_b=b.up, n_b=b.ratings
        )
        _, comparison.overall_p_value = two_proportion_z_test(x_a=a.up, n_a=a.ratings, x_b=b.up, n_b=b.ratings)
    if with_series:
        comparison.series = _series(params=params, rows=kept_rows if series_rows is None else series_rows)
    return comparison


def holm_flag(rows: Sequence[RateRow]) -> int:
    """Adjust the p-values of the tested rows with Holm and flag them; returns how many were tested.

    Holm over the tested rows only: which ones are tested depends on their total
    count, not on the difference, so the filter does not bias the test.
    """
    tested = [row for row in rows if row.tested]
    for row, adjusted in zip(tested, holm_adjust([row.p_value for row in tested])):
        row.p_adjusted = adjusted
        row.significant = adjusted < ALPHA
    return len(tested)


def significance_order(row: RateRow) -> tuple:
    """The page's order: tested rows first by Holm-adjusted p (so every flag comes first), then the
    largest change; untested ones by their unadjusted p. Ties by name, then id, for a stable page."""
    p = row.p_adjusted if row.tested else row.p_value
    return (not row.tested, 1.0 if p is None else p, -abs(row.difference or 0.0), row.name.lower(), row.row_id)


def table_order(row: RateRow) -> tuple:
    # From the largest increase to the largest decrease; ties by name, then id, for a stable page.
    return (-(row.difference or 0.0), row.name.lower(), row.row_id)


def fill_figures(row: RateRow, *, n_a: int, n_b: int) -> None:
    """Rates, the difference with its interval, the z-test and whether it may be trusted."""
    if n_a:
        row.rate_a = row.down_a / n_a
    if n_b:
        row.rate_b = row.down_b / n_b
    if n_a and n_b:
        row.difference, row.ci_low, row.ci_high = newcombe_interval(x_a=row.down_a, n_a=n_a, x_b=row.down_b, n_b=n_b)
        row.z, row.p_value = two_proportion_z_test(x_a=row.down_a, n_a=n_a, x_b=row.down_b, n_b=n_b)
        row.tested = normal_approximation_holds(x_a=row.down_a, n_a=n_a, x_b=row.down_b, n_b=n_b)


def _category_row(
    *, category: Category, signals: dict[str, int], downs: dict[str, int], n_a: int, n_b: int, params: CompareParams
) -> CategoryRow:
    row = CategoryRow(
        category_id=category.id,
        area_id=category.area_id,
        name=category.name,
        status=category.status,
        signals_a=signals["a"],
        signals_b=signals["b"],
        down_a=downs["a"],
        down_b=downs["b"],
        is_new=signals["a"] == 0 and signals["b"] > 0,
        is_gone=signals["b"] == 0 and signals["a"] > 0,
        items_a_url=_items_url(params.a, params, category_id=category.id),
        items_b_url=_items_url(params.b, params, category_id=category.id),
    )
    fill_figures(row, n_a=n_a, n_b=n_b)
    return row


def _area_row(
    *,
    area: AreaInfo,
    signals: dict[str, int],
    downs: dict[str, int],
    unsorted_signals: dict[str, int],
    unsorted_downs: dict[str, int],
    n_a: int,
    n_b: int,
    params: CompareParams,
) -> AreaRow:
    row = AreaRow(
        area_id=area.id,
        name=area.name,
        status=area.status,
        signals_a=signals["a"],
        signals_b=signals["b"],
        down_a=downs["a"],
        down_b=downs["b"],
        unsorted_signals_a=unsorted_signals["a"],
        unsorted_signals_b=unsorted_signals["b"],
        unsorted_down_a=unsorted_downs["a"],
        unsorted_down_b=unsorted_downs["b"],
        is_new=signals["a"] == 0 and signals["b"] > 0,
        is_gone=signals["b"] == 0 and signals["a"] > 0,
        items_a_url=_items_url(params.a, params, area_id=area.id),
        items_b_url=_items_url(params.b, params, area_id=area.id),
    )
    fill_figures(row, n_a=n_a, n_b=n_b)
    return row


def _bucket_starts(params: CompareParams) -> list[date]:
    if params.bucket == "day":
        return [params.date_from + timedelta(days=offset) for offset in range(params.days)]
    # Weeks start on Monday; the first one is clipped to the window.
    starts = [params.date_from]
    monday = params.date_from - timedelta(days=params.date_from.weekday()) + timedelta(days=7)
    while monday <= params.date_to:
        starts.append(monday)
        monday += timedelta(days=7)
    return starts


def _bucket_of(day: date, params: CompareParams) -> date:
    if params.bucket == "day":
        return day
    return max(params.date_from, day - timedelta(days=day.weekday()))


def _series(*, params: CompareParams, rows: Iterable[tuple[str, dict]]) -> dict:
    """The thumbs-up rate per bucket with its Wilson interval: each side, and each variant of a whole-version side."""
    starts = _bucket_starts(params)
    position = {start: index for index, start in enumerate(starts)}
    totals: dict[tuple[str, str], list[int]] = {}
    ups: dict[tuple[str, str], list[int]] = {}
    for key, row in rows:
        if row["kind"] != FeedbackItem.Kind.RATING or row["rating"] not in (1, -1):
            continue
        index = position[_bucket_of(row["day"], params)]
        series_keys = [(key, "")]
        side = params.a if key == "a" else params.b
        if not side.variant and row["variant"]:
            series_keys.append((key, row["variant"]))
        for series_key in series_keys:
            totals.setdefault(series_key, [0] * len(starts))[index] += row["n"]
            ups.setdefault(series_key, [0] * len(starts))[index] += row["n"] if row["rating"] == 1 else 0

    lines = []
    for key, side in (("a", params.a), ("b", params.b)):
        variants = sorted(variant for k, variant in totals if k == key and variant)
        # One variant alone would draw the same line twice.
        for variant in [""] + (variants if len(variants) > 1 else []):
            n = totals.get((key, variant), [0] * len(starts))
            up = ups.get((key, variant), [0] * len(starts))
            intervals = [wilson_interval(successes=u, total=t) if t else (None, None) for u, t in zip(up, n)]
            lines.append(
                {
                    "label": Side(side.version, variant).label if variant else side.label,
                    "side": key,
                    "variant": variant or side.variant,
                    "n": n,
                    "up": up,
                    "rate": [json_round(u / t) if t else None for u, t in zip(up, n)],
                    "low": [json_round(low) for low, _ in intervals],
                    "high": [json_round(high) for _, high in intervals],
                }
            )
    return {"bucket": params.bucket, "buckets": [start.isoformat() for start in starts], "lines": lines}


def comparison_build(*, params: CompareParams, with_checks: bool = False) -> Comparison:
    """The whole comparison: side totals, per-category figures and flags, the thumbs-up series. Four queries;
    `with_checks` adds the rows per rollout check (three more)."""
    rows = _daily_counts(sides=(params.a, params.b), date_from=params.date_from, date_to=params.date_to, by_day=False)
    comparison = _comparison_from_rows(
        params=params, rows=rows, categories=_categories(rows), series_rows=_series_rows(params=params)
    )
    if with_checks:
        checks_attach([comparison])
    return comparison


def checks_attach(comparisons: Sequence[Comparison]) -> None:
    """Fill each comparison's rows per rollout check; three queries however many comparisons."""
    from rollouts.compare import (
        check_rows_many,  # rollouts imports this module: not at the top
    )

    for comparison, rows in zip(comparisons, check_rows_many([comparison.params for comparison in comparisons])):
        comparison.checks = rows


# --- Output: page chart, JSON, CSV --------------------------------------------------------


def json_round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def json_significant(value: float | None, figures: int = 6) -> float | None:
    # p-values go down to 1e-20 and below: keep significant figures, not decimals.
    return None if value is None else float(f"{value:.{figures}g}")


def _side_json(summary: SideSummary) -> dict:
    return {
        "spec": summary.side.spec,
        "version": summary.side.version,
        "variant": summary.side.variant or None,
        "ratings": summary.ratings,
        "up": summary.up,
        "down": summary.down,
        "reports": summary.reports,
        "uncategorized_down": summary.uncategorized_down,
        "no_area_down": summary.no_area_down,
        "up_rate": json_round(summary.up_rate),
        "up_rate_ci": [json_round(summary.up_low), json_round(summary.up_high)] if summary.ratings else None,
    }


def _figures_json(row: RateRow) -> dict:
    return {
        "name": row.name,
        "status": row.status,
        "signals_a": row.signals_a,
        "signals_b": row.signals_b,
        "down_a": row.down_a,
        "down_b": row.down_b,
        "rate_a": json_round(row.rate_a),
        "rate_b": json_round(row.rate_b),
        "difference": json_round(row.difference),
        "ci_low": json_round(row.ci_low),
        "ci_high": json_round(row.ci_high),
        "z": json_round(row.z, 4),
        "p_value": json_significant(row.p_value),
        "p_adjusted": json_significant(row.p_adjusted),
        "tested": row.tested,
        "significant": row.significant,
        "direction": row.direction,
        "is_new": row.is_new,
        "is_gone": row.is_gone,
        "items_a_url": row.items_a_url,
        "items_b_url": row.items_b_url,
    }


def _category_json(row: CategoryRow) -> dict:
    # Which area a category is in is told once, by the area's `categories`.
    return {"category_id": row.category_id} | _figures_json(row)


def _area_json(row: AreaRow) -> dict:
    return (
        {"area_id": row.area_id}
        | _figures_json(row)
        | {
            "unsorted_signals_a": row.unsorted_signals_a,
            "unsorted_signals_b": row.unsorted_signals_b,
            "unsorted_down_a": row.unsorted_down_a,
            "unsorted_down_b": row.unsorted_down_b,
            "categories": row.category_ids,
        }
    )


def comparison_json(comparison: Comparison) -> dict:
    params = comparison.params
    return {
        "a": _side_json(comparison.a),
        "b": _side_json(comparison.b),
        "from": params.date_from.isoformat(),
        "to": params.date_to.isoformat(),
        "denominator": DENOMINATOR,
        "difference": "b - a",
        "confidence": 0.95,
        "interval": "newcombe-hybrid-score",
        "test": "two-proportion-z",
        "correction": "holm",
        "alpha": ALPHA,
        "min_expected": MIN_EXPECTED,
        "min_down_total": MIN_DOWN_TOTAL,
        "tested": comparison.tested,
        # Holm runs twice: over the categories tested, and over the areas tested as a family of its own.
        "areas_tested": comparison.areas_tested,
        "overall": {
            "up_rate_difference": json_round(comparison.overall_difference),
            "ci": [json_round(comparison.overall_low), json_round(comparison.overall_high)]
            if comparison.overall_difference is not None
            else None,
            "p_value": json_significant(comparison.overall_p_value),
        },
        "areas": [_area_json(row) for row in comparison.areas],
        "categories": [_category_json(row) for row in comparison.categories],
        # The rollout checks: a third family for Holm, over the side's checked rollouts, not its ratings.
        "checks_denominator": CHECKS_DENOMINATOR,
        "checks_tested": comparison.checks_tested,
        "checks": _checks_json(comparison.checks),
        "series": comparison.series,
    }


def _checks_json(rows: Sequence[CheckRow]) -> list[dict]:
    if not rows:
        return []
    from rollouts.compare import (
        check_rows_json,  # rollouts imports this module: not at the top
    )

    return check_rows_json(list(rows))


CSV_COLUMNS = (
    "level", "category_id", "area_id", "name", "status", "a", "b", "from", "to", "ratings_a", "ratings_b",
    "signals_a", "signals_b", "down_a", "down_b", "rate_a", "rate_b", "difference", "ci_low", "ci_high",
    "z", "p_value", "p_adjusted", "tested", "significant", "direction", "is_new", "is_gone",
    # Filled on check rows only, last so that the columns before them keep their places.
    "check", "rollouts_a", "rollouts_b",
)


def comparison_csv(comparison: Comparison) -> str:
    """The page's table as rows: each area, followed by its categories, then the categories outside any area,
    then the rollout checks (when the comparison has their rows).

    `level` tells an area row from a category row and a check row; a category
    row carries its area's id too. A check row puts the flagged rollouts in
    signals and down, its rates over the side's checked rollouts (rollouts_a,
    rollouts_b), and the check's name in `check`. Every row names both sides
    and their denominators so it stands alone in a spreadsheet.
    """
    params = comparison.params
    shared = {
        "a": params.a.spec,
        "b": params.b.spec,
        "from": params.date_from.isoformat(),
        "to": params.date_to.isoformat(),
        "ratings_a": comparison.a.ratings,
        "ratings_b": comparison.b.ratings,
    }
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    records = []
    for area in comparison.areas:
        records.append({"level": "area"} | _area_json(area))
        records += [{"level": "category", "area_id": area.area_id} | _category_json(row) for row in area.categories]
    records += [{"level": "category"} | _category_json(row) for row in comparison.outside_areas]
    records += [
        {"level": "check", "check": row.check_name, "rollouts_a": row.rollouts_a, "rollouts_b": row.rollouts_b}
        | _figures_json(row)
        for row in comparison.checks
    ]
    for record in records:
        record |= shared
        writer.writerow({key: spreadsheet_safe("" if value is None else value) for key, value in record.items()})
    return out.getvalue()


def chart_data(comparison: Comparison) -> dict:
    """What static/js/compare.js draws: the sorted differences and the thumbs-up series."""
    return {
        "a": comparison.params.a.label,
        "b": comparison.params.b.label,
        "differences": [
            {
                "id": row.category_id,
                "label": row.name,
                "difference": json_round(row.difference),
                "low": json_round(row.ci_low),
                "high": json_round(row.ci_high),
                "significant": row.significant,
                "direction": row.direction,
                "is_new": row.is_new,
                "url": row.items_b_url,
            }
            # Only what was tested: a row too small to test is a grey bar that says nothing. The
            # table keeps those, folded.
            for row in comparison.categories
            if row.difference is not None and row.tested
        ],
        "untested": sum(not row.tested for row in comparison.categories if row.difference is not None),
        "series": comparison.series,
    }


# --- Choices for the form ------------------------------------------------------------------


_VERSION_NUMBER = re.compile(r"([0-9]+)")


def _version_key(version: str) -> tuple:
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
    ordered = sorted(versions, key=_version_key, reverse=True)
    options = []
    for version in ordered:
        options.append((version, f"{version} (all variants)" if versions[version] else version))
        options.extend(
            (Side(version, variant).spec, f"{version} · variant {variant}") for variant in sorted(versions[version])
        )
    by_recency = sorted(last_seen, key=lambda version: (last_seen[version], _version_key(version)), reverse=True)
    default_b = by_recency[0] if by_recency else ""
    default_a = by_recency[1] if len(by_recency) > 1 else ""
    return {
        "options": options,
        "specs": [spec for spec, _ in options],
        "default_a": default_a,
        "default_b": default_b,
    }


# --- Saved and pinned comparisons ----------------------------------------------------------


def saved_comparison_params(*, saved: SavedComparison, today: date | None = None) -> CompareParams:
    """The window a saved comparison covers today: fixed dates, or the last ``window_days`` days.

    CompareError for a window the compare page would refuse (dates outside
    EARLIEST_DATE..LATEST_DATE, an end before the start): rows saved before
    those checks, or written by hand, must not break the pages that list them.
    """
    today = today or timezone.localdate()
    if saved.window_days:
        date_to = today
        if saved.window_days > (today - EARLIEST_DATE).days + 1:
            raise CompareError(
                422, f"window_days: the last {saved.window_days} days start before {EARLIEST_DATE}", "window_days"
            )
        date_from = today - timedelta(days=saved.window_days - 1)
    else:
        date_to = saved.date_to or today
        _date_in_range(date_to, field="to")
        if saved.date_from is not None:
            _date_in_range(saved.date_from, field="from")
        date_from = saved.date_from or _default_start(date_to)
        if date_from > date_to:
            raise CompareError(422, f"to: the end date {date_to} is before the start date {date_from}", "to")
    days = (date_to - date_from).days + 1
    return CompareParams(
        a=Side(saved.a_version, saved.a_variant),
        b=Side(saved.b_version, saved.b_variant),
        date_from=date_from,
        date_to=date_to,
        bucket="day" if days <= MAX_DAILY_BUCKETS else "week",
    )


def saved_comparison_create(
    *, params: CompareParams, name: str = "", rolling: bool = False, pinned: bool = True, user=None
) -> SavedComparison:
    """Save a comparison. A rolling one keeps the window's length and always ends today."""
    return SavedComparison.objects.create(
        name=name.strip()[:200] or f"{params.a.label} → {params.b.label}",
        a_version=params.a.version,
        a_variant=params.a.variant,
        b_version=params.b.version,
        b_variant=params.b.variant,
        date_from=None if rolling else params.date_from,
        date_to=None if rolling else params.date_to,
        window_days=params.days if rolling else None,
        pinned=pinned,
        created_by=user if user is not None and user.is_authenticated else None,
    )


def saved_comparison_set_pinned(*, saved_id: int, pinned: bool) -> bool:
    """Pin or unpin; False when the comparison is gone."""
    return SavedComparison.objects.filter(id=saved_id).update(pinned=pinned) > 0


def saved_comparison_delete(*, saved_id: int) -> bool:
    deleted, _ = SavedComparison.objects.filter(id=saved_id).delete()
    return deleted > 0


@dataclass
class SavedEntry:
    """A saved comparison with the window it covers today, or (params None) why it cannot be shown."""

    saved: SavedComparison
    params: CompareParams | None
    error: str = ""

    @property
    def url(self) -> str:
        if self.params is not None:
            return self.params.url
        # The compare page with the stored values: it shows what is wrong with them.
        query = {"a": self.saved.a_spec, "b": self.saved.b_spec}
        query |= {key: day.isoformat() for key, day in (("from", self.saved.date_from), ("to", self.saved.date_to)) if day}
        return "/compare/?" + urlencode(query)

    @property
    def window_label(self) -> str:
        if self.saved.window_days:
            return f"last {self.saved.window_days} days"
        if self.params is None:
            return f"{self.saved.date_from or '…'} – {self.saved.date_to or '…'}"
        return f"{self.params.date_from} – {self.params.date_to}"


def _saved_entry_parts(saved: SavedComparison, *, today: date) -> tuple[CompareParams | None, str]:
    try:
        return saved_comparison_params(saved=saved, today=today), ""
    except CompareError as exc:
        return None, exc.message


def saved_comparisons(*, today: date | None = None) -> list[SavedEntry]:
    """Every saved comparison, pinned first, with the window it covers today."""
    today = today or timezone.localdate()
    saved = SavedComparison.objects.select_related("created_by").order_by("-pinned", "-created_at", "-id")
    return [SavedEntry(entry, *_saved_entry_parts(entry, today=today)) for entry in saved]


@dataclass
class PinnedStatus(SavedEntry):
    """A pinned comparison as the overview shows it: its current window and what regressed."""

    comparison: Comparison | None = None

    @property
    def regressions(self) -> list[CategoryRow]:
        return self.comparison.regressions if self.comparison else []

    @property
    def improvements(self) -> list[CategoryRow]:
        return self.comparison.improvements if self.comparison else []

    @property
    def area_regressions(self) -> list[AreaRow]:
        return self.comparison.area_regressions if self.comparison else []

    @property
    def area_improvements(self) -> list[AreaRow]:
        return self.comparison.area_improvements if self.comparison else []

    @property
    def check_regressions(self) -> list[CheckRow]:
        return self.comparison.check_regressions if self.comparison else []

    @property
    def regressed(self) -> bool:
        return self.comparison.regressed if self.comparison else False


def pinned_regressions(*, today: date | None = None, limit: int = MAX_PINS_ON_OVERVIEW) -> list[PinnedStatus]:
    """Every pinned comparison with its significant regressions (areas, categories and rollout checks), for
    the overview and the regression notifications; regressed ones first.

    Six queries however many pins: the pins, one aggregate over the union
    of their sides and windows (with the areas' names), the category names,
    and for the checks (rollouts.compare.check_rows_many) the checked
    rollouts and the standing flags over the same union, and the check
    catalogue. Each pin then takes its own rows from the shared aggregates.
    """
    pins = list(SavedComparison.objects.filter(pinned=True).order_by("-created_at", "-id")[:limit])
    if not pins:
        return []
    today = today or timezone.localdate()
    parts = [_saved_entry_parts(pin, today=today) for pin in pins]
    # A pin whose window cannot be compared shows its error; the others still answer.
    all_params = [params for params, _ in parts if params is not None]
    rows, categories = [], {}
    if all_params:
        rows = _daily_counts(
            sides=[side for params in all_params for side in (params.a, params.b)],
            date_from=min(params.date_from for params in all_params),
            date_to=max(params.date_to for params in all_params),
        )
        categories = _categories(rows)
    statuses = [
        PinnedStatus(
            saved=pin,
            params=params,
            error=error,
            comparison=None
            if params is None
            else _comparison_from_rows(params=params, rows=rows, categories=categories, with_series=False),
        )
        for pin, (params, error) in zip(pins, parts)
    ]
    checks_attach([status.comparison for status in statuses if status.comparison is not None])
    # What needs attention first; otherwise newest first (a stable sort keeps that order).
    return sorted(statuses, key=lambda status: not status.regressed)
