"""The audit trail: one row for every change a person makes."""

from typing import Any

from feedback.models import FeedbackItem
from labeling.models import Area, AuditEvent, Category


def audit_record(
    *,
    actor,
    action: str,
    item: FeedbackItem | None = None,
    category: Category | None = None,
    area: Area | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Record who did what to which item, category or area (``details``: before/after values)."""
    return AuditEvent.objects.create(
        actor=actor, action=action, item=item, category=category, area=area, details=details or {}
    )


def audit_trail(
    *, item: FeedbackItem | None = None, category: Category | None = None, area: Area | None = None, limit: int = 50
):
    events = AuditEvent.objects.select_related("actor")
    if area is not None:
        events = events.filter(area=area)
    if item is not None:
        events = events.filter(item=item)
    if category is not None:
        events = events.filter(category=category)
    return events[:limit]
