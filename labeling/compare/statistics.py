"""The statistics of a comparison, each reproducible by hand (no scipy): Wilson and Newcombe
intervals, the pooled two-proportion z-test and its normal-approximation rule, Holm's correction."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054  # the 97.5% point of the standard normal: 95% two-sided
ALPHA = 0.05
# The z-test leans on the normal approximation; below these counts it is not
# trusted and the category is shown but never flagged. Five expected events
# per side under the pooled rate is the textbook rule for a 2x2 table.
MIN_EXPECTED = 5
MIN_DOWN_TOTAL = 10


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
