"""The rows of a comparison (each side's summary, a category's, an area's) with their figures, the
tests that flag them (Holm over each level's family), and the orders they are shown in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from labeling.compare.figures import (
    format_p,
    interval_points,
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
)


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
    items_a_url: str = ""
    items_b_url: str = ""

    @property
    def is_new(self) -> bool:
        """Signals in B and none in A."""
        return self.signals_a == 0 and self.signals_b > 0

    @property
    def is_gone(self) -> bool:
        """Signals in A and none in B."""
        return self.signals_b == 0 and self.signals_a > 0

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
    checks: list[RateRow] = field(default_factory=list)

    @property
    def regressions(self) -> list[CategoryRow]:
        return [row for row in self.categories if row.regression]

    @property
    def check_regressions(self) -> list[RateRow]:
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
