"""How a comparison's figures are shown: percentages and points on the page, rounded numbers in JSON."""

from __future__ import annotations


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


def json_round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def json_significant(value: float | None, figures: int = 6) -> float | None:
    # p-values go down to 1e-20 and below: keep significant figures, not decimals.
    return None if value is None else float(f"{value:.{figures}g}")


def significance_json(row) -> dict:
    """A row's two-proportion test as both comparison APIs answer it (a category's, an area's, a check's)."""
    return {
        "z": json_round(row.z, 4),
        "p_value": json_significant(row.p_value),
        "p_adjusted": json_significant(row.p_adjusted),
        "tested": row.tested,
        "significant": row.significant,
        "direction": row.direction,
    }


def links_json(row) -> dict:
    """Whether a row is new or gone in B, and the search pages of its items on each side."""
    return {
        "is_new": row.is_new,
        "is_gone": row.is_gone,
        "items_a_url": row.items_a_url,
        "items_b_url": row.items_b_url,
    }
