"""How often Python's garbage collector runs, for work that allocates many objects at once.

CPython collects its young generation every 700 allocations, and each
older-generation pass walks every object the process has loaded (Django, the
models, pydantic's schemas, pyarrow). Work that allocates hundreds of
thousands of objects, keeps them for a while and then drops them (a batch of
500 webhook events, an export) spent a sixth to a third of its CPU there.
"""

import contextlib
import gc
from collections.abc import Iterator

# Allocations between two young-generation collections (CPython's default is 700).
YOUNG_THRESHOLD = 50_000


def collect_less_often_from_now() -> None:
    """For a long-running process after start-up: set aside what is loaded (gc.freeze), which lives as
    long as the process, and collect young objects every YOUNG_THRESHOLD allocations."""
    gc.freeze()
    _collect_young_less_often(gc.get_threshold())


def _collect_young_less_often(thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(max(thresholds[0], YOUNG_THRESHOLD), *thresholds[1:])


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect less often within the block: what was loaded before is set aside (gc.freeze) and young
    objects are collected every YOUNG_THRESHOLD allocations; both are restored after."""
    thresholds = gc.get_threshold()
    freeze = gc.get_freeze_count() == 0  # a server that froze its own start-up objects keeps them frozen
    if freeze:
        gc.freeze()
    _collect_young_less_often(thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if freeze:
            gc.unfreeze()
