"""Conditions for "before" and "after" a row in an order by (time, id): what keyset pages and neighbour links need.

Each leads with a plain bound on the time, which an index on (time, id) can
seek to whatever the planner believes; with the OR alone and stale
statistics PostgreSQL walked such an index from its end (164 ms instead of
5 for a page half-way down a million items).
"""

from datetime import datetime

from django.db.models import Q


def earlier_than(field: str, moment: datetime, row_id: int, *, inclusive: bool = False) -> Q:
    """Rows before (`field`, id) = (moment, row_id); with `inclusive`, that row too."""
    tie = Q(id__lte=row_id) if inclusive else Q(id__lt=row_id)
    return Q(**{f"{field}__lte": moment}) & (Q(**{f"{field}__lt": moment}) | tie)


def later_than(field: str, moment: datetime, row_id: int, *, inclusive: bool = False) -> Q:
    """Rows after (`field`, id) = (moment, row_id); with `inclusive`, that row too."""
    tie = Q(id__gte=row_id) if inclusive else Q(id__gt=row_id)
    return Q(**{f"{field}__gte": moment}) & (Q(**{f"{field}__gt": moment}) | tie)
