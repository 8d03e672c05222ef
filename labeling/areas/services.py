"""Reviewer decisions on areas: rename, confirm, merge, and moving a category to an area.

Same contract as `labeling.categories.services`: each decision locks the rows
it changes, refuses with a sentence a person understands (`AreaRefused`)
before it writes anything, and records audit events with the values before
and after. Cluster runs keep what reviewers decide here: a rename sets
`named_by_reviewer`, a moved category gets `area_by_reviewer`, and a merged
area's `merged_into` sends later runs on to the target
(`labeling.clustering.reconcile._final`).
"""

import numpy as np
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from labeling.audit import audit_record
from labeling.categories.services import CategoryRefused, merge_pair_lock
from labeling.models import Area, Assignment, Category

NAME_MAX_LENGTH = Area._meta.get_field("name").max_length


class AreaRefused(CategoryRefused):
    """An area decision that cannot be made; ``message`` says why, ``field`` names the form field at fault."""


def _locked(area_id: int) -> Area:
    try:
        return Area.objects.select_for_update(of=("self",)).select_related("merged_into").get(id=area_id)
    except Area.DoesNotExist:
        raise AreaRefused("That area no longer exists.") from None


def _clean_name(name: str) -> str:
    # PostgreSQL cannot store NUL in text; refuse it here rather than fail in the database.
    if "\x00" in (name or ""):
        raise AreaRefused("A name cannot contain a NUL character.", field="name")
    name = " ".join((name or "").split())
    if not name:
        raise AreaRefused("An area needs a name.", field="name")
    if len(name) > NAME_MAX_LENGTH:
        raise AreaRefused(f"A name can have at most {NAME_MAX_LENGTH} characters.", field="name")
    return name


def _merged_text(area: Area) -> str:
    if area.merged_into_id:
        return f"“{area.name}” has been merged into “{area.merged_into.name}”"
    return f"“{area.name}” has been merged"


def _centroids_refresh(*area_ids: int) -> None:
    """Each area's centroid: the size-weighted mean of its open categories' centroids.

    The same rule a cluster run applies, so new signals arriving before the
    next run wait in the area their nearest categories now belong to. An area
    left without categories keeps its last centroid, as after a run.
    """
    rows = Category.objects.open().filter(area_id__in=area_ids).exclude(centroid=None)
    sums: dict[int, np.ndarray] = {}
    for area_id, centroid, size in rows.values_list("area_id", "centroid", "size"):
        vector = np.frombuffer(centroid, dtype=np.float32).astype(np.float64)
        sums[area_id] = sums.get(area_id, 0) + max(size, 1) * vector
    for area_id, total in sums.items():
        norm = np.linalg.norm(total)
        if norm:
            Area.objects.filter(id=area_id).update(centroid=(total / norm).astype(np.float32).tobytes())


# --- Naming and status --------------------------------------------------------------


@transaction.atomic
def area_rename(*, area_id: int, user, name: str) -> Area:
    """Set a reviewer's name for an area; later cluster runs keep it."""
    area = _locked(area_id)
    name = _clean_name(name)
    if area.status == Area.Status.MERGED:
        raise AreaRefused(f"{_merged_text(area)}; rename that one instead.")
    if area.name == name and area.named_by_reviewer:
        return area
    if area.name == name:
        # Saving the machine's words unchanged still means a person chose them.
        action, details = "kept name", {"named_by_reviewer": {"before": False, "after": True}}
    else:
        action, details = "renamed", {"name": {"before": area.name, "after": name}}
    area.name, area.named_by_reviewer = name, True
    area.save(update_fields=["name", "named_by_reviewer"])
    audit_record(actor=user, action=action, area=area, details=details)
    return area


@transaction.atomic
def area_confirm(*, area_id: int, user) -> Area:
    """Mark a proposed area as one reviewers keep."""
    area = _locked(area_id)
    if area.status == Area.Status.CONFIRMED:
        raise AreaRefused(f"“{area.name}” is already confirmed.")
    if area.status == Area.Status.MERGED:
        raise AreaRefused(f"{_merged_text(area)}; it cannot be confirmed.")
    before = area.status
    area.status = Area.Status.CONFIRMED
    area.save(update_fields=["status"])
    audit_record(actor=user, action="confirmed", area=area, details={"status": {"before": before, "after": area.status}})
    return area


# --- Merge ---------------------------------------------------------------------------


@transaction.atomic
def area_merge(*, area_id: int, target_id: int, user) -> Area:
    """Fold an area into another; returns the target.

    Its categories (with whoever placed them) and every item that sits in it,
    sorted or not, move to the target. Areas merged earlier into the absorbed
    one now point straight at the target. Each moved category's history
    records the move.
    """
    source, target = merge_pair_lock(
        Area.objects.select_for_update(of=("self",)).select_related("merged_into"),
        area_id,
        target_id,
        a_noun="an area",
        refused=AreaRefused,
        merged=lambda area: f"{_merged_text(area)} already.",
    )

    now = timezone.now()
    categories = list(Category.objects.select_for_update().filter(area=source).order_by("id").only("id", "name"))
    unsorted = Assignment.objects.filter(area=source, category=None).count()
    # An item follows its category, even where an earlier change left its own area behind.
    items_moved = Assignment.objects.filter(Q(area=source) | Q(category__area=source)).update(area=target, updated_at=now)
    Category.objects.filter(area=source).update(area=target, updated_at=now)
    redirected = Area.objects.filter(merged_into=source).update(merged_into=target)
    before = source.status
    source.status, source.merged_into = Area.Status.MERGED, target
    source.save(update_fields=["status", "merged_into"])
    _centroids_refresh(target.id)

    moved = {"categories moved": len(categories), "unsorted items moved": unsorted, "items moved": items_moved}
    audit_record(
        actor=user,
        action="merged",
        area=source,
        details={
            "status": {"before": before, "after": Area.Status.MERGED},
            "into": {"id": target.id, "name": target.name},
            **moved,
        },
    )
    audit_record(
        actor=user,
        action="merged",
        area=target,
        details={"from": {"id": source.id, "name": source.name}, **moved, "earlier merges redirected": redirected},
    )
    for category in categories:
        audit_record(
            actor=user,
            action="moved to area",
            category=category,
            details={"area": {"before": source.name, "after": target.name}, "why": f"area “{source.name}” merged"},
        )
    return target


# --- Moving a category -----------------------------------------------------------------


@transaction.atomic
def category_move_to_area(*, category_id: int, area_id: int, user) -> Category:
    """Put a category (and its items) in an area; cluster runs keep it there."""
    try:
        category = Category.objects.select_for_update(of=("self",)).select_related("area").get(id=category_id)
    except Category.DoesNotExist:
        raise AreaRefused("That category no longer exists.") from None
    try:
        area = Area.objects.select_for_update(of=("self",)).select_related("merged_into").get(id=area_id)
    except Area.DoesNotExist:
        raise AreaRefused("That area no longer exists.", field="area") from None
    if category.status == Category.Status.MERGED:
        raise AreaRefused(f"“{category.name}” has been merged; move the category it was merged into.")
    if area.status == Area.Status.MERGED:
        raise AreaRefused(f"{_merged_text(area)}; move the category there instead.", field="area")
    if category.area_id == area.id and category.area_by_reviewer:
        raise AreaRefused(f"“{category.name}” is already in “{area.name}”.", field="area")

    now = timezone.now()
    previous = category.area
    items_moved = Assignment.objects.filter(category=category).exclude(area=area).update(area=area, updated_at=now)
    category.area, category.area_by_reviewer, category.updated_at = area, True, now
    category.save(update_fields=["area", "area_by_reviewer", "updated_at"])

    if previous is not None and previous.id == area.id:
        # Already there by a run's choice: a person confirming it pins it for later runs.
        details = {"area_by_reviewer": {"before": False, "after": True}, "area": {"id": area.id, "name": area.name}}
        audit_record(actor=user, action="kept area", category=category, details=details)
        audit_record(
            actor=user, action="kept category", area=area, details={"category": {"id": category.id, "name": category.name}}
        )
        return category

    audit_record(
        actor=user,
        action="moved to area",
        category=category,
        details={"area": {"before": previous.name if previous else None, "after": area.name}, "items moved": items_moved},
    )
    shown = {"id": category.id, "name": category.name}
    if previous is not None:
        audit_record(
            actor=user,
            action="category moved out",
            area=previous,
            details={"category": shown, "to": {"id": area.id, "name": area.name}, "items moved": items_moved},
        )
    audit_record(
        actor=user,
        action="category moved in",
        area=area,
        details={
            "category": shown,
            "from": {"id": previous.id, "name": previous.name} if previous else "no area",
            "items moved": items_moved,
        },
    )
    _centroids_refresh(*[a.id for a in (previous, area) if a is not None])
    return category
