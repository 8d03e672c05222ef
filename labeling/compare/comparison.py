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
from dataclasses import dataclass
from datetime import date, timedelta
from urllib.parse import urlencode

from django.db.models import Q

from feedback.models import FeedbackItem
from labeling import counts
from labeling.compare.figures import (
    json_round,
)
from labeling.compare.params import CompareParams, Side
from labeling.compare.rows import (
    AreaRow,
    CategoryRow,
    Comparison,
    SideSummary,
    fill_figures,
    holm_flag,
    table_order,
)
from labeling.compare.statistics import (
    newcombe_interval,
    two_proportion_z_test,
    wilson_interval,
)
from labeling.flags import item_flags
from labeling.models import Area, Category

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


def _window_holds_all(match: Q, *, date_from: date, date_to: date) -> bool:
    """Whether every item counted under `match` falls between the two days; one query."""
    return all(date_from <= first and last <= date_to for first, last in counts.spans(match).values())


def daily_counts(*, sides: Iterable[Side], date_from: date, date_to: date, by_day: bool = True) -> list[dict]:
    """Counts by day, version, variant, kind, rating, category and area for the given sides.

    Read from the pre-aggregated daily counts (labeling.counts): two queries,
    the counts and the names of their areas, whatever the number of items.
    With `by_day` false the window's days are summed in the database (each
    row's "day" is None): what one comparison's figures need, in far fewer rows.
    """
    match = _sides_match(sides)
    if not by_day and _window_holds_all(match, date_from=date_from, date_to=date_to):
        # Every item of the sides is in the window (the default over all their days):
        # the all-time totals are the sums, a few hundred rows instead of one per day and key.
        found = counts.counted(counts.KEY, match)
    else:
        group_by = counts.DAILY_KEY if by_day else counts.KEY
        found = counts.counted(group_by, match & Q(day__gte=date_from, day__lte=date_to), daily=True)
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
    rows_per_comparison = item_flags().comparison_rows([comparison.params for comparison in comparisons])
    for comparison, rows in zip(comparisons, rows_per_comparison):
        comparison.checks = rows
