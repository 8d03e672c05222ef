"""The comparison's rows per rollout check: the share of each side's rollouts a check flagged.

Same statistics as the categories (labeling.compare.comparison): rate = rollouts of the
side with a standing flag of the check (pending or confirmed; a dismissed flag
does not count) / the side's checked rollouts (items with at least one tool
call) in the window; Newcombe's interval of the difference, the pooled
two-proportion z-test, Holm's correction over the checks tested (a family of
their own, beside areas and categories), flagged below ALPHA. A positive
difference means the newer side ``b`` does it more: a regression.

The compare page loads these rows after it renders (rollouts.views); the
comparison API and the pinned comparisons take them from labeling.compare.comparison,
which imports this module inside its functions only, since this one imports it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from urllib.parse import urlencode

from django.db.models import Count, Q
from django.db.models.functions import TruncDate

from core.dates import day_window
from feedback.models import FeedbackItem
from labeling.compare.figures import json_round, links_json, significance_json
from labeling.compare.params import CompareParams, Side
from labeling.compare.rows import RateRow, fill_figures, holm_flag, table_order
from rollouts import selectors
from rollouts.models import RolloutFlag


@dataclass(kw_only=True)
class CheckRow(RateRow):
    check_name: str
    explanation: str = ""
    kind: str = ""
    rollouts_a: int = 0
    rollouts_b: int = 0

    @property
    def row_id(self) -> str:
        return self.check_name


def _search_url(side: Side, params: CompareParams, check_name: str) -> str:
    query = {"flag": check_name, "model_version": side.version}
    if side.variant:
        query["variant"] = side.variant
    query |= {"date_from": params.date_from.isoformat(), "date_to": params.date_to.isoformat()}
    return "/search/?" + urlencode(query)


def _daily_rollouts(*, sides: Iterable[Side], date_from: date, date_to: date) -> list[dict]:
    """Checked rollouts by day, version and variant of the given sides: one query."""
    match = Q(pk__in=[])
    for side in set(sides):
        match |= side.condition()
    start, end = day_window(date_from, date_to)
    return list(
        FeedbackItem.objects.filter(match, occurred_at__gte=start, occurred_at__lt=end, checked_rollout__calls__gt=0)
        .annotate(day=TruncDate("occurred_at"))
        .values("day", "model_version", "variant")
        .annotate(n=Count("id"))
        .order_by()
    )


def _daily_flagged(*, sides: Iterable[Side], date_from: date, date_to: date) -> list[dict]:
    """Rollouts with a standing flag, by day, version, variant and check, of the given sides: one query.

    An item has one day, version and variant, so its distinct count in one group adds up across groups.
    """
    match = Q(pk__in=[])
    for side in set(sides):
        match |= side.condition("item__")
    start, end = day_window(date_from, date_to)
    return list(
        RolloutFlag.objects.filter(
            match,
            status__in=selectors.STANDING,
            item__occurred_at__gte=start,
            item__occurred_at__lt=end,
            item__checked_rollout__calls__gt=0,
        )
        .annotate(day=TruncDate("item__occurred_at"))
        .values("day", "item__model_version", "item__variant", "check_name")
        .annotate(n=Count("item", distinct=True))
        .order_by()
    )


def _side_of(params: CompareParams, day: date, version: str, variant: str) -> str | None:
    if not params.date_from <= day <= params.date_to:
        return None
    if params.a.matches(version, variant):
        return "a"
    if params.b.matches(version, variant):
        return "b"
    return None


def _rows_of(
    *, params: CompareParams, rollouts: list[dict], flags: list[dict], infos: dict[str, selectors.CheckInfo | None]
) -> list[CheckRow]:
    """One comparison's rows, taken from the counts shared by every comparison asked for at once."""
    totals = {"a": 0, "b": 0}
    for row in rollouts:
        key = _side_of(params, row["day"], row["model_version"], row["variant"])
        if key:
            totals[key] += row["n"]
    flagged: dict[str, dict[str, int]] = defaultdict(lambda: {"a": 0, "b": 0})
    for row in flags:
        key = _side_of(params, row["day"], row["item__model_version"], row["item__variant"])
        if key:
            flagged[row["check_name"]][key] += row["n"]
    names = [name for name, info in infos.items() if info is not None and info.kind != "custom"]
    names += sorted(name for name in flagged if name not in names)
    result = []
    for name in names:
        info = infos.get(name)
        counts = flagged[name]
        row = CheckRow(
            check_name=name,
            name=info.title if info else name,
            explanation=info.explanation if info else "",
            kind=info.kind if info else "custom",
            status="",
            signals_a=counts["a"],
            signals_b=counts["b"],
            down_a=counts["a"],
            down_b=counts["b"],
            rollouts_a=totals["a"],
            rollouts_b=totals["b"],
            items_a_url=_search_url(params.a, params, name),
            items_b_url=_search_url(params.b, params, name),
        )
        fill_figures(row, n_a=totals["a"], n_b=totals["b"])
        result.append(row)
    holm_flag(result)
    result.sort(key=table_order)
    return result


def check_rows_many(params_list: Sequence[CompareParams]) -> list[list[CheckRow]]:
    """The rows per check of several comparisons (the pinned ones), in their order.

    Three queries however many comparisons: the checked rollouts and the
    standing flags over the union of their sides and windows, by day, and the
    check catalogue; each comparison then takes its own days and sides.
    """
    if not params_list:
        return []
    sides = [side for params in params_list for side in (params.a, params.b)]
    date_from = min(params.date_from for params in params_list)
    date_to = max(params.date_to for params in params_list)
    rollouts = _daily_rollouts(sides=sides, date_from=date_from, date_to=date_to)
    flags = _daily_flagged(sides=sides, date_from=date_from, date_to=date_to)
    infos: dict[str, selectors.CheckInfo | None] = {info.name: info for info in selectors.check_catalogue()}
    for name in {row["check_name"] for row in flags} - set(infos):
        # A retired custom check that left flags: rare, one query each.
        infos[name] = selectors.check_info(name)
    return [_rows_of(params=params, rollouts=rollouts, flags=flags, infos=infos) for params in params_list]


def check_rows(*, params: CompareParams) -> list[CheckRow]:
    """One row per check (built-in ones always, custom ones with flags in the window). Three queries."""
    return check_rows_many([params])[0]


def check_rows_json(rows: list[CheckRow]) -> list[dict]:
    """The rows as the comparison API answers them (its `checks` list)."""
    return [
        {
            "check": row.check_name,
            "title": row.name,
            "kind": row.kind,
            "rollouts": {"a": row.rollouts_a, "b": row.rollouts_b},
            "flagged": {"a": row.down_a, "b": row.down_b},
            "rate": {"a": json_round(row.rate_a), "b": json_round(row.rate_b)},
            "difference": json_round(row.difference),
            "ci": [json_round(row.ci_low), json_round(row.ci_high)],
        }
        | significance_json(row)
        | {"regression": row.regression}
        | links_json(row)
        for row in rows
    ]
