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
whatever the number of categories, areas or pinned comparisons."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from django.db.models import Q

from feedback.models import FeedbackItem
from labeling import counts
from labeling.compare.figures import (
    format_p,
    interval_points,
    json_round,
    percent,
    points,
)
from labeling.compare.params import CompareParams, Side
from labeling.compare.statistics import (
    ALPHA,
    holm_adjust,
    newcombe_interval,
    normal_approximation_holds,
    two_proportion_z_test,
    wilson_interval,
)
from labeling.models import Area, Category

if TYPE_CHECKING:
    # rollouts builds on labeling (rollouts.compare imports this module): at run time it is
    # imported inside the functions that need its rows per check.
    from rollouts.compare import CheckRow

DENOMINATOR = (
    "Rate = thumbs-down ratings assigned to the category (or filed under the area, its unsorted ones "
    "included) / all ratings (up and down) of that side in the date range. Reports count as signals, "
    "not in the rates."
)
CHECKS_DENOMINATOR = (
    "Rate = the side's rollouts (items with tool calls, checked) with a standing flag of the check (pending or "
    "confirmed; a dismissed flag does not count) / all the side's checked rollouts in the date range."
)


def _sides_match(sides: Iterable[Side]) -> Q:
    match = Q(pk__in=[])
    for side in set(sides):
        match |= side.condition()
    return match


def daily_counts(*, sides: Iterable[Side], date_from: date, date_to: date, by_day: bool = True) -> list[dict]:
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


def categories_of(rows: Iterable[dict]) -> dict[int, Category]:
    ids = {row["assignment__category_id"] for row in rows if row["assignment__category_id"]}
    if not ids:
        return {}
    found = Category.objects.filter(id__in=ids).only("id", "name", "status", "area_id")
    return {category.id: category for category in found}


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


def comparison_from_rows(
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
    rows = daily_counts(sides=(params.a, params.b), date_from=params.date_from, date_to=params.date_to, by_day=False)
    comparison = comparison_from_rows(
        params=params, rows=rows, categories=categories_of(rows), series_rows=_series_rows(params=params)
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
