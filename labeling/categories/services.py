"""Reviewer decisions on categories: rename, confirm, archive, merge, split, delete.

Each decision locks the rows it changes, refuses with a sentence a person
understands (`CategoryRefused`) before it writes anything, and records an
audit event with the values before and after. Reviewer decisions are what a
cluster run must never undo: a rename sets `named_by_reviewer`, a split
marks the moved items as placed by a reviewer, a merge leaves the absorbed
category's centroid in place so later runs still route its cluster to the
target (see `labeling.clustering.reconcile._final`).
"""

import numpy as np
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.audit import audit_record
from labeling.clustering.runs import cluster_run_start
from labeling.clustering.services import vectors_for
from labeling.models import Assignment, Category, ClusterRun, Label

NAME_MAX_LENGTH = Category._meta.get_field("name").max_length
REPRESENTATIVES = 5


class CategoryRefused(Exception):
    """A decision that cannot be made; the message says why, for the person who asked.

    ``field`` names the form field at fault when there is one.
    """

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def merge_pair_lock(rows, source_id: int, target_id: int, *, a_noun: str, refused: type[CategoryRefused], merged):
    """The two categories or areas of a merge, locked, once the merge is allowed; else `refused`.

    `rows` is the locking queryset of their model, `a_noun` how the refusals
    name one ("a category"), `merged(source)` why a source merged earlier
    cannot be merged again.
    """
    noun = a_noun.split()[-1]
    if source_id == target_id:
        raise refused(f"{a_noun.capitalize()} cannot be merged into itself.", field="target")
    # Lock in id order so two merges of the same pair in opposite directions
    # cannot deadlock; the second then sees the first's result and is refused.
    locked = {row.id: row for row in rows.filter(id__in=[source_id, target_id]).order_by("id")}
    if source_id not in locked:
        raise refused(f"That {noun} no longer exists.")
    if target_id not in locked:
        raise refused(f"The {noun} to merge into no longer exists.", field="target")
    source, target = locked[source_id], locked[target_id]
    if source.status == rows.model.Status.MERGED:
        raise refused(merged(source))
    if not target.is_open:
        raise refused(
            f"“{target.name}” is {target.get_status_display().lower()}; merge into a proposed or confirmed {noun}.",
            field="target",
        )
    return source, target


def _locked(category_id: int) -> Category:
    """The category row, locked until the transaction ends (no-op on SQLite, which locks the file)."""
    try:
        return Category.objects.select_for_update().get(id=category_id)
    except Category.DoesNotExist:
        raise CategoryRefused("That category no longer exists.") from None


def _clean_name(name: str) -> str:
    name = " ".join((name or "").split())
    if not name:
        raise CategoryRefused("A category needs a name.", field="name")
    if len(name) > NAME_MAX_LENGTH:
        raise CategoryRefused(f"A name can have at most {NAME_MAX_LENGTH} characters.", field="name")
    return name


def _sizes_refresh(*category_ids: int) -> None:
    """Recount the sizes of just these categories (a full refresh reads every category)."""
    counts = dict(
        Assignment.objects.filter(category_id__in=category_ids)
        .values_list("category")
        .annotate(n=Count("id"))
        .values_list("category", "n")
    )
    for category_id in category_ids:
        Category.objects.filter(id=category_id).update(size=counts.get(category_id, 0))


# --- Naming and status --------------------------------------------------------------


@transaction.atomic
def category_rename(*, category_id: int, user, name: str, description: str) -> Category:
    """Set a reviewer's name and description; later cluster runs keep them."""
    category = _locked(category_id)
    name = _clean_name(name)
    description = (description or "").strip()
    changes = {
        field: {"before": getattr(category, field), "after": value}
        for field, value in (("name", name), ("description", description))
        if getattr(category, field) != value
    }
    if not changes and category.named_by_reviewer:
        return category
    if not changes:
        # Saving the machine's words unchanged still means a person chose
        # them: the flag makes the next run keep them.
        action = "kept name"
        changes = {"named_by_reviewer": {"before": False, "after": True}}
    else:
        action = "renamed" if "name" in changes else "described"
    category.name, category.description = name, description
    category.named_by_reviewer = True
    category.updated_at = timezone.now()
    category.save(update_fields=["name", "description", "named_by_reviewer", "updated_at"])
    audit_record(actor=user, action=action, category=category, details=changes)
    return category


def _status_set(category_id: int, *, user, status: str, action: str, allowed_from: tuple[str, ...]) -> Category:
    category = _locked(category_id)
    if category.status == status:
        raise CategoryRefused(f"“{category.name}” is already {category.get_status_display().lower()}.")
    if category.status not in allowed_from:
        raise CategoryRefused(
            f"“{category.name}” is {category.get_status_display().lower()}; it cannot be {action}."
        )
    before = category.status
    category.status = status
    category.updated_at = timezone.now()
    category.save(update_fields=["status", "updated_at"])
    audit_record(actor=user, action=action, category=category, details={"status": {"before": before, "after": status}})
    return category


@transaction.atomic
def category_confirm(*, category_id: int, user) -> Category:
    """Mark a category as a real failure mode (an archived one may be brought back this way)."""
    return _status_set(
        category_id,
        user=user,
        status=Category.Status.CONFIRMED,
        action="confirmed",
        allowed_from=(Category.Status.PROPOSED, Category.Status.ARCHIVED),
    )


@transaction.atomic
def category_archive(*, category_id: int, user) -> Category:
    """Retire a category: runs stop sorting new items into it; its items stay visible."""
    return _status_set(
        category_id, user=user, status=Category.Status.ARCHIVED, action="archived", allowed_from=Category.OPEN_STATUSES
    )


# --- Merge ---------------------------------------------------------------------------


@transaction.atomic
def category_merge(*, category_id: int, target_id: int, user) -> Category:
    """Fold a category into another; returns the target.

    Every assignment and label moves to the target. Assignments keep who made
    them: a reviewer's placement stays a reviewer's, so runs keep leaving it
    alone. Categories merged earlier into the absorbed one now point straight
    at the target.
    """
    source, target = merge_pair_lock(
        Category.objects.select_for_update(),
        category_id,
        target_id,
        a_noun="a category",
        refused=CategoryRefused,
        merged=lambda category: f"“{category.name}” has already been merged.",
    )

    now = timezone.now()
    moved = Assignment.objects.filter(category=source).update(category=target, updated_at=now)
    # A label's updated_at is when its reviewer judged the item; a merge does not change that.
    relabelled = Label.objects.filter(category=source).update(category=target)
    redirected = Category.objects.filter(merged_into=source).update(merged_into=target, updated_at=now)
    before = source.status
    source.status, source.merged_into, source.updated_at = Category.Status.MERGED, target, now
    source.save(update_fields=["status", "merged_into", "updated_at"])
    _sizes_refresh(source.id, target.id)
    target.refresh_from_db(fields=["size"])

    audit_record(
        actor=user,
        action="merged",
        category=source,
        details={
            "status": {"before": before, "after": Category.Status.MERGED},
            "into": {"id": target.id, "name": target.name},
            "items moved": moved,
            "labels moved": relabelled,
        },
    )
    audit_record(
        actor=user,
        action="merged",
        category=target,
        details={
            "from": {"id": source.id, "name": source.name},
            "items moved": moved,
            "labels moved": relabelled,
            "earlier merges redirected": redirected,
        },
    )
    return target


# --- Split ---------------------------------------------------------------------------


def _normalised_mean(vectors: np.ndarray) -> np.ndarray | None:
    if not len(vectors):
        return None
    mean = vectors.astype(np.float64).mean(axis=0)
    norm = np.linalg.norm(mean)
    return None if norm == 0 else (mean / norm).astype(np.float32)


def _embedded_vectors(item_ids) -> tuple[list[int], np.ndarray]:
    """The ids of the items that have a vector, and their vectors in the same order."""
    rows = list(
        FeedbackItem.objects.filter(id__in=item_ids, embedding__isnull=False).order_by("id").values_list(
            "id", "embedding_id"
        )
    )
    return [row[0] for row in rows], vectors_for([row[1] for row in rows])


def _closest(ids: list[int], vectors: np.ndarray, centroid: np.ndarray | None) -> list[int]:
    if centroid is None or not ids:
        return []
    order = np.argsort(-(vectors @ centroid), kind="stable")[:REPRESENTATIVES]
    return [ids[i] for i in order.tolist()]


@transaction.atomic
def category_split(*, category_id: int, item_ids: list[int], name: str, user) -> Category:
    """Move the chosen items out into a new confirmed category; returns it.

    The new category's centroid is the normalised mean of the moved items'
    vectors, and the old one's is recomputed from what stays, so the next run
    matches each cluster to the right one. The moved items count as placed by
    a reviewer, so no run moves them back.
    """
    name = _clean_name(name)
    category = _locked(category_id)
    if category.status == Category.Status.MERGED:
        raise CategoryRefused(f"“{category.name}” has been merged; split its target instead.")
    chosen = set(item_ids)
    if not chosen:
        raise CategoryRefused("Select the items to move into the new category.", field="items")
    # The category's row lock serialises reviewers' decisions on it.
    assignments = Assignment.objects.filter(category=category)
    in_category = set(assignments.filter(item_id__in=chosen).values_list("item_id", flat=True))
    if missing := chosen - in_category:
        raise CategoryRefused(
            f"{len(missing)} of the selected items are no longer in “{category.name}”; reload and try again.",
            field="items",
        )
    if not assignments.exclude(item_id__in=chosen).exists():
        raise CategoryRefused(
            "A split must leave at least one item behind; to rename the category, edit its name.", field="items"
        )

    now = timezone.now()
    moved_ids, moved_vectors = _embedded_vectors(chosen)
    new_centroid = _normalised_mean(moved_vectors)
    new = Category.objects.create(
        name=name,
        status=Category.Status.CONFIRMED,
        named_by_reviewer=True,
        centroid=None if new_centroid is None else new_centroid.tobytes(),
        representative_ids=_closest(moved_ids, moved_vectors, new_centroid),
        size=len(chosen),
        created_at=now,
        updated_at=now,
    )
    Assignment.objects.filter(item_id__in=chosen).update(
        category=new, assigned_by=Assignment.By.REVIEWER, reviewer=user, confidence=None, run=None, updated_at=now
    )

    kept_ids, kept_vectors = _embedded_vectors(
        Assignment.objects.filter(category=category).values_list("item_id", flat=True)
    )
    kept_centroid = _normalised_mean(kept_vectors)
    update_fields = ["representative_ids", "updated_at"]
    if kept_centroid is not None:
        category.centroid = kept_centroid.tobytes()
        update_fields.append("centroid")
    category.representative_ids = [i for i in category.representative_ids if i not in chosen]
    category.updated_at = now
    category.save(update_fields=update_fields)
    _sizes_refresh(category.id)

    audit_record(
        actor=user,
        action="split",
        category=category,
        details={"items moved": len(chosen), "into": {"id": new.id, "name": new.name}},
    )
    audit_record(
        actor=user,
        action="split",
        category=new,
        details={"from": {"id": category.id, "name": category.name}, "items moved": len(chosen)},
    )
    return new


# --- Delete (admins) -------------------------------------------------------------------


@transaction.atomic
def category_delete(*, category_id: int, user) -> None:
    """Delete a category that holds nothing: no items, no labels.

    The audit event is kept without the category (its own history goes with
    it), naming what was deleted.
    """
    category = _locked(category_id)
    if Assignment.objects.filter(category=category).exists() or Label.objects.filter(category=category).exists():
        raise CategoryRefused(
            f"“{category.name}” still has items or labels; merge or archive it instead of deleting it."
        )
    details = {"category": {"id": category.id, "name": category.name, "status": category.status}}
    category.delete()
    audit_record(actor=user, action="deleted category", details=details)


# --- Cluster runs ----------------------------------------------------------------------


@transaction.atomic
def cluster_run_request(*, user) -> ClusterRun:
    """A reviewer starts a cluster run; RunAlreadyActive if one is going.

    The run and its audit event commit together, and the task is queued only
    after that commit (labeling.clustering.runs.cluster_run_start).
    """
    run = cluster_run_start(trigger=ClusterRun.Trigger.REVIEWER, user=user)
    audit_record(actor=user, action="started cluster run", details={"run": run.id})
    return run
