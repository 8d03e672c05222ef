"""Saved comparisons: a named query, fixed or rolling over the latest days, optionally pinned to
the overview, which lists the pinned ones that show a regression."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from urllib.parse import urlencode

from django.utils import timezone

from labeling.compare.comparison import (
    categories_of,
    checks_attach,
    comparison_from_rows,
    daily_counts,
)
from labeling.compare.params import (
    EARLIEST_DATE,
    MAX_DAILY_BUCKETS,
    CompareError,
    CompareParams,
    Side,
    date_in_range,
    default_start,
)
from labeling.compare.rows import AreaRow, CategoryRow, Comparison, RateRow
from labeling.models import SavedComparison

MAX_PINS_ON_OVERVIEW = 10


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
        date_in_range(date_to, field="to")
        if saved.date_from is not None:
            date_in_range(saved.date_from, field="from")
        date_from = saved.date_from or default_start(date_to)
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
    def check_regressions(self) -> list[RateRow]:
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
        rows = daily_counts(
            sides=[side for params in all_params for side in (params.a, params.b)],
            date_from=min(params.date_from for params in all_params),
            date_to=max(params.date_to for params in all_params),
        )
        categories = categories_of(rows)
    statuses = [
        PinnedStatus(
            saved=pin,
            params=params,
            error=error,
            comparison=None
            if params is None
            else comparison_from_rows(params=params, rows=rows, categories=categories, with_series=False),
        )
        for pin, (params, error) in zip(pins, parts)
    ]
    checks_attach([status.comparison for status in statuses if status.comparison is not None])
    # What needs attention first; otherwise newest first (a stable sort keeps that order).
    return sorted(statuses, key=lambda status: not status.regressed)
