"""The comparison's rows per rollout check: the share of each side's rollouts a check flagged.

Same statistics as the categories (labeling.compare): rate = rollouts of the
side with a standing flag of the check (pending or confirmed; a dismissed flag
does not count) / the side's checked rollouts (items with at least one tool
call) in the window; Newcombe's interval of the difference, the pooled
two-proportion z-test, Holm's correction over the checks tested (a family of
their own, beside areas and categories), flagged below ALPHA. A positive
difference means the newer side ``b`` does it more: a regression.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from urllib.parse import urlencode

from django.db.models import Count, Q

from feedback.models import FeedbackItem
from labeling import compare
from rollouts import selectors
from rollouts.models import RolloutFlag


@dataclass(kw_only=True)
class CheckRow(compare.RateRow):
    check_name: str
    explanation: str = ""
    kind: str = ""
    rollouts_a: int = 0
    rollouts_b: int = 0

    @property
    def row_id(self) -> str:
        return self.check_name


def _search_url(side: compare.Side, params: compare.CompareParams, check_name: str) -> str:
    query = {"flag": check_name, "model_version": side.version}
    if side.variant:
        query["variant"] = side.variant
    query |= {"date_from": params.date_from.isoformat(), "date_to": params.date_to.isoformat()}
    return "/search/?" + urlencode(query)


def check_rows(*, params: compare.CompareParams) -> list[CheckRow]:
    """One row per check (built-in ones always, custom ones with flags in the window). Two queries."""
    start, end = compare.day_window(params.date_from, params.date_to)
    in_window = Q(occurred_at__gte=start, occurred_at__lt=end, checked_rollout__calls__gt=0)
    rollouts = {"a": 0, "b": 0}
    for key, side in (("a", params.a), ("b", params.b)):
        rollouts[key] = FeedbackItem.objects.filter(in_window & side.condition()).count()
    flagged: dict[str, dict[str, int]] = defaultdict(lambda: {"a": 0, "b": 0})
    for key, side in (("a", params.a), ("b", params.b)):
        rows = (
            RolloutFlag.objects.filter(
                status__in=selectors.STANDING,
                item__occurred_at__gte=start,
                item__occurred_at__lt=end,
                item__checked_rollout__calls__gt=0,
            )
            .filter(side.condition("item__"))
            .values("check_name")
            .annotate(n=Count("item", distinct=True))
            .order_by()
        )
        for row in rows:
            flagged[row["check_name"]][key] = row["n"]
    infos = {info.name: info for info in selectors.check_catalogue()}
    names = [info.name for info in infos.values() if info.kind != "custom"]
    names += sorted(name for name in flagged if name not in names)
    result = []
    for name in names:
        info = infos.get(name) or selectors.check_info(name)
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
            rollouts_a=rollouts["a"],
            rollouts_b=rollouts["b"],
            is_new=counts["a"] == 0 and counts["b"] > 0,
            is_gone=counts["b"] == 0 and counts["a"] > 0,
            items_a_url=_search_url(params.a, params, name),
            items_b_url=_search_url(params.b, params, name),
        )
        compare.fill_figures(row, n_a=rollouts["a"], n_b=rollouts["b"])
        result.append(row)
    compare.holm_flag(result)
    result.sort(key=compare.table_order)
    return result


def check_rows_json(rows: list[CheckRow]) -> list[dict]:
    return [
        {
            "check": row.check_name,
            "title": row.name,
            "kind": row.kind,
            "rollouts": {"a": row.rollouts_a, "b": row.rollouts_b},
            "flagged": {"a": row.down_a, "b": row.down_b},
            "rate": {"a": compare.json_round(row.rate_a), "b": compare.json_round(row.rate_b)},
            "difference": compare.json_round(row.difference),
            "ci": [compare.json_round(row.ci_low), compare.json_round(row.ci_high)],
            "p_value": compare.json_significant(row.p_value),
            "p_adjusted": compare.json_significant(row.p_adjusted),
            "tested": row.tested,
            "significant": row.significant,
            "regression": row.regression,
        }
        for row in rows
    ]
