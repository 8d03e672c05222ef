"""A comparison as the API answers it (JSON, CSV) and as the page draws it (chart data)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from core.csvcells import spreadsheet_safe
from labeling.compare.comparison import CHECKS_DENOMINATOR, DENOMINATOR
from labeling.compare.figures import json_round, json_significant, links_json, significance_json
from labeling.compare.rows import AreaRow, CategoryRow, Comparison, RateRow, SideSummary
from labeling.compare.statistics import ALPHA, MIN_DOWN_TOTAL, MIN_EXPECTED
from labeling.flags import item_flags


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
    } | significance_json(row) | links_json(row)


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


def _checks_json(rows: Sequence) -> list[dict]:
    return item_flags().rows_json(list(rows)) if rows else []


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
