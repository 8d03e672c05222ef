"""Reads for the notifications page."""

from django.db.models import Count, Q

from notifications.models import Delivery, Destination

RECENT_DELIVERIES = 100


def destinations_list() -> list[Destination]:
    """Every destination with its delivery counts by outcome (one query)."""
    return list(
        Destination.objects.annotate(
            delivered=Count("deliveries", filter=Q(deliveries__status=Delivery.Status.DELIVERED)),
            failed=Count("deliveries", filter=Q(deliveries__status=Delivery.Status.FAILED)),
            waiting=Count(
                "deliveries", filter=Q(deliveries__status__in=(Delivery.Status.PENDING, Delivery.Status.SENDING))
            ),
        ).order_by("name", "id")
    )


def deliveries_recent(*, destination_id: int | None = None, status: str = "", limit: int = RECENT_DELIVERIES):
    deliveries = Delivery.objects.select_related("notification", "destination").order_by("-created_at", "-id")
    if destination_id is not None:
        deliveries = deliveries.filter(destination_id=destination_id)
    if status:
        deliveries = deliveries.filter(status=status)
    return list(deliveries[:limit])
