"""Undoing a bulk action: put back only what still holds the value the action wrote; an item
someone changed since keeps that later change, and the undo says how many it left."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from core.roles import is_admin
from feedback.models import FeedbackItem
from labeling.audit import audit_record
from labeling.bulk.services import (
    BulkRefused,
    Kind,
    UndoResult,
    id_chunks,
    sizes_refresh,
    unstamp,
)
from labeling.bulk.sql import rows_update
from labeling.models import (
    Assignment,
    BulkAction,
    Category,
    DatasetPin,
    DoubleReview,
    Label,
    Settlement,
)


def _undo_merge(action: BulkAction, user, now: datetime) -> tuple[int, int]:
    source_id, target_id = action.params["source"], action.params["target"]
    locked = {c.id: c for c in Category.objects.select_for_update().filter(id__in=[source_id, target_id]).order_by("id")}
    source, target = locked.get(source_id), locked.get(target_id)
    if source is None or target is None:
        raise BulkRefused("one of the two categories no longer exists; the merge cannot be undone", status=409)
    if source.status != Category.Status.MERGED or source.merged_into_id != target.id:
        raise BulkRefused(f"“{source.name}” is no longer merged into “{target.name}”", status=409)
    items, labels, redirected = action.undo["items"], action.undo["labels"], action.undo["redirected"]
    restored = 0
    for chunk in id_chunks(items):
        restored += Assignment.objects.filter(item_id__in=chunk, category=target).update(category=source, updated_at=now)
    for chunk in id_chunks(labels):
        Label.objects.filter(id__in=chunk, category=target).update(category=source)
    Category.objects.filter(id__in=redirected, merged_into=target).update(merged_into=source, updated_at=now)
    source.status, source.merged_into, source.updated_at = action.undo["status"], None, now
    source.save(update_fields=["status", "merged_into", "updated_at"])
    sizes_refresh([source.id, target.id])
    audit_record(
        actor=user,
        action="undid merge",
        category=source,
        details={"from": {"id": target.id, "name": target.name}, "items moved back": restored},
    )
    return restored, len(items) - restored


def may_undo(user, action: BulkAction) -> bool:
    """Whoever did it, or an admin; a token may undo what a token of the same source did."""
    return user is not None and (is_admin(user) or action.actor_id == user.id)


def bulk_undo(*, action_id: int, user, made_by: str, token_source_id: int | None = None) -> UndoResult:
    """Put back what a bulk action replaced, where nothing changed it since; BulkRefused otherwise.

    `user` None with `token_source_id`: an API token, which may undo what a
    token of its source did.
    """
    with transaction.atomic():
        action = BulkAction.objects.select_for_update().filter(id=action_id).first()
        if action is None:
            raise BulkRefused("no such bulk action", status=404)
        if token_source_id is not None:
            allowed = action.actor_id is None and action.params.get("token_source") == token_source_id
        else:
            allowed = may_undo(user, action)
        if not allowed:
            raise BulkRefused("only whoever made a bulk action, or an admin, may undo it", status=403)
        if action.undone_at is not None:
            raise BulkRefused("this bulk action was undone already", status=409)
        now = timezone.now()
        if action.kind == Kind.MERGE:
            restored, kept = _undo_merge(action, user, now)
        else:
            restored, kept = _UNDO[action.kind](action, now)
        action.undone_at, action.undone_by = now, user
        action.save(update_fields=["undone_at", "undone_by"])
        details = {"bulk action": action.id, "what": action.summary, "restored": restored, "by": made_by}
        if kept:
            details["left as changed since"] = kept
        audit_record(actor=user, action="undid bulk action", category=action.category, area=action.area, details=details)
    return UndoResult(action=action, restored=restored, kept=kept)


def _undo_move(action: BulkAction, now: datetime) -> tuple[int, int]:
    undo = action.undo
    target = undo["target"]
    ids, created = undo["ids"], undo["created"]
    # Still where the action put them, as a reviewer's placement: nobody moved them since.
    untouched = set()
    for chunk in id_chunks(ids + created):
        untouched.update(
            Assignment.objects.filter(
                item_id__in=chunk, category_id=target, assigned_by=Assignment.By.REVIEWER
            ).values_list("item_id", flat=True)
        )
    previous = {
        item_id: (category, area, by, reviewer, confidence, run)
        for item_id, category, area, by, reviewer, confidence, run in zip(
            ids, undo["category"], undo["area"], undo["by"], undo["reviewer"], undo["confidence"], undo["run"]
        )
        if item_id in untouched
    }
    rows_update(
        Assignment,
        "item_id",
        ("category_id", "area_id", "assigned_by", "reviewer_id", "confidence", "run_id"),
        [(item_id, *values) for item_id, values in previous.items()],
        also={"updated_at": now},
    )
    removed = [item_id for item_id in created if item_id in untouched]
    for chunk in id_chunks(removed):
        Assignment.objects.filter(item_id__in=chunk).delete()
    # The items the action moved on from embedded go back to it, where they were restored.
    back = sorted(set(undo["embedded"]) & (set(removed) | set(previous)))
    for chunk in id_chunks(back):
        FeedbackItem.objects.filter(id__in=chunk, status=FeedbackItem.Status.ASSIGNED).update(
            status=FeedbackItem.Status.EMBEDDED, status_changed_at=now
        )
    sizes_refresh([target, *(values[0] for values in previous.values())])
    restored = len(previous) + len(removed)
    return restored, len(ids) + len(created) - restored


def _labels_untouched(ids: list[int], at: datetime) -> set[int]:
    untouched = set()
    for chunk in id_chunks(ids):
        untouched.update(Label.objects.filter(id__in=chunk, updated_at=at).values_list("id", flat=True))
    return untouched


def _restore_labels(action: BulkAction, fields: tuple[str, ...]) -> tuple[int, int]:
    """Put back these label fields and each label's own updated_at, where the action's write still stands."""
    undo = action.undo
    at = unstamp(undo["at"])
    untouched = _labels_untouched(undo["ids"], at)
    columns = [undo[name] for name in fields]
    rows = [
        (label_id, *(column[index] for column in columns), unstamp(undo["updated_at"][index]))
        for index, label_id in enumerate(undo["ids"])
        if label_id in untouched
    ]
    names = ["category_id" if name == "category" else name for name in fields]
    rows_update(Label, "id", (*names, "updated_at"), rows)
    return len(rows), len(undo["ids"]) - len(rows)


def _undo_verdict(action: BulkAction, now: datetime) -> tuple[int, int]:
    restored, kept = _restore_labels(action, ("verdict", "category"))
    at = unstamp(action.undo["at"])
    created = action.undo["created"]
    removed = 0
    for chunk in id_chunks(created):
        labels = Label.objects.filter(item_id__in=chunk, reviewer_id=action.actor_id, updated_at=at)
        # A settlement made since that kept one of these labels loses that link, as a deletion would do;
        # then one DELETE instead of the collector's select-then-delete in batches of a few hundred.
        Settlement.objects.filter(label__in=labels).update(label=None)
        removed += labels._raw_delete(labels.db)
    return restored + removed, kept + len(created) - removed


def _undo_tags(action: BulkAction, now: datetime) -> tuple[int, int]:
    return _restore_labels(action, ("tags",))


def _undo_split(action: BulkAction, now: datetime) -> tuple[int, int]:
    return _restore_labels(action, ("split",))


def _undo_pin(action: BulkAction, now: datetime) -> tuple[int, int]:
    removed = DatasetPin.objects.filter(bulk_action=action).delete()[0]
    return removed, len(action.undo["created"]) - removed


def _undo_queue(action: BulkAction, now: datetime) -> tuple[int, int]:
    at = unstamp(action.undo["at"])
    created = action.undo["created"]
    removed = 0
    # An item reviewed since it was queued keeps its place: its second review counts for agreement.
    for chunk in id_chunks(created):
        removed += (
            DoubleReview.objects.filter(item_id__in=chunk, created_at=at)
            .exclude(item__labels__created_at__gte=at)
            .delete()[0]
        )
    return removed, len(created) - removed


_UNDO = {
    Kind.MOVE: _undo_move,
    Kind.VERDICT: _undo_verdict,
    Kind.TAGS_ADD: _undo_tags,
    Kind.TAGS_REMOVE: _undo_tags,
    Kind.SPLIT: _undo_split,
    Kind.PIN: _undo_pin,
    Kind.QUEUE: _undo_queue,
}
