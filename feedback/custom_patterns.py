"""The custom scrub patterns sources add in the admin, applied to every signal.

Every source's patterns apply to every signal, not only the source's own: a
host name one team marks private is no less private in another's text, and
whatever reaches a signal's embedded text can reach category names.

Pages and the pipeline read them often (once per listed item), so a process
keeps them for a few seconds; a change made in this process clears them at
once, one made in another process shows within that time. Exports ask for
them fresh.
"""

import time

from feedback.models import Source

MAX_AGE_SECONDS = 5.0
_cached: tuple[float, tuple[tuple[str, str], ...]] | None = None


def all_sources(*, fresh: bool = False) -> tuple[tuple[str, str], ...]:
    """Every source's (name, regex) pairs, each pair once."""
    global _cached
    now = time.monotonic()
    if not fresh and _cached is not None and now - _cached[0] < MAX_AGE_SECONDS:
        return _cached[1]
    pairs: dict[tuple[str, str], None] = {}
    for rows in Source.objects.exclude(scrub_patterns=[]).order_by("id").values_list("scrub_patterns", flat=True):
        for row in rows or ():
            pairs[(row["name"], row["regex"])] = None
    _cached = (now, tuple(pairs))
    return _cached[1]


def forget(**signal_arguments) -> None:
    """Drop the kept patterns (connected to Source saves and deletes)."""
    global _cached
    _cached = None
