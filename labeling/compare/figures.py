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
