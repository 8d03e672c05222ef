"""Factories for the area tests: items, areas, categories, unsorted buckets and a snapshot of who is where."""

import uuid
from datetime import timedelta

import numpy as np
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.models import Area, Assignment, AuditEvent, Category


def item_make(source, *, rating=-1, kind="rating", version="2.1", variant="A", days_ago=0.0, comment="it broke"):
    return FeedbackItem.objects.create(
        source=source, external_id=uuid.uuid4().hex, kind=kind, rating=rating, comment=comment,
        model_version=version, variant=variant, occurred_at=timezone.now() - timedelta(days=days_ago),
        receipt_id=uuid.uuid4(), status=FeedbackItem.Status.ASSIGNED,
    )


def area_make(name, **fields) -> Area:
    return Area.objects.create(name=name, **fields)


def category_make(name, items=(), *, area=None, status=Category.Status.PROPOSED, **fields) -> Category:
    """A category in ``area`` whose items sit in the same area, as a cluster run leaves them."""
    category = Category.objects.create(name=name, status=status, size=len(items), area=area, **fields)
    Assignment.objects.bulk_create([Assignment(item=item, category=category, area=area) for item in items])
    return category


def unsorted_make(area, items) -> None:
    """Put items in an area's unsorted bucket: an area, no category."""
    Assignment.objects.bulk_create([Assignment(item=item, area=area) for item in items])


def unit(seed: int) -> bytes:
    vector = np.random.default_rng(seed).standard_normal(384)
    return (vector / np.linalg.norm(vector)).astype(np.float32).tobytes()


def snapshot():
    return (
        list(Area.objects.order_by("id").values_list("id", "name", "status", "merged_into", "named_by_reviewer")),
        list(Category.objects.order_by("id").values_list("id", "area", "area_by_reviewer")),
        list(Assignment.objects.order_by("id").values_list("item", "category", "area")),
        AuditEvent.objects.count(),
    )
