"""Writes of the review workflow: labels, review locks, double-review samples."""

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.audit import audit_record
from labeling.models import (
    Assignment,
    Category,
    DoubleReview,
    Label,
    ReviewLock,
    Settlement,
)

# A lock outlives a slow read of a long agent run, but not a reviewer who
# went to lunch: after this the item goes back to the queue.
LOCK_MINUTES = 10

HINT_MAX_LENGTH = 4000
CORRECTED_RESPONSE_MAX_LENGTH = 100_000
OTHER_TAG_MAX_LENGTH = 50
OTHER_TAGS_MAX = 10

# Tags for models that game their checks instead of doing the task; exports
# look for these, so keep the spelling stable.
REWARD_HACKING_TAGS = (
    "special-cased a test",
    "claimed success falsely",
    "read the answer from history",
    "disabled or skipped tests",
    "hard-coded expected output",
)
COMMON_TAGS = ("wrong file", "ignored instructions", "hallucinated API", "too slow", "verbose")
LABEL_TAGS = REWARD_HACKING_TAGS + COMMON_TAGS



class LabelRefused(Exception):
    """A label that breaks a rule; the message is one line a reviewer understands."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class LabelSaved:
    label: Label
    created: bool
    # field -> (before, after), only what this save changed
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    assignment_moved: bool = False
    # What undo needs to put things back as they were: plain JSON, kept in the session.
    undo: dict[str, Any] = field(default_factory=dict)


# A save can be undone for this long; the page offers it for UNDO_SHOWN_SECONDS, and the
# server allows a little more so a click in the last second is not lost on a slow link.
UNDO_SHOWN_SECONDS = 10
UNDO_SECONDS = 30


# --- Labels -------------------------------------------------------------------------


def _label_values(label: Label | None) -> dict[str, Any]:
    if label is None:
        return {}
    return {
        "verdict": label.verdict,
        "category_id": label.category_id,
        "severity": label.severity,
        "tags": list(label.tags),
        "hint": label.hint,
        "corrected_response": label.corrected_response,
        "split": label.split,
    }


def _category_text(category: Category | None) -> str:
    return f"{category.name} (#{category.id})" if category else "none"


def label_save(
    *,
    item: FeedbackItem,
    reviewer,
    verdict: str,
    category: Category | None = None,
    severity: str = "",
    tags: list[str] | tuple[str, ...] = (),
    hint: str = "",
    corrected_response: str = "",
    split: str = Label.Split.NONE,
    queue: str = "",
) -> LabelSaved:
    """Create or update the reviewer's label on an item; LabelRefused if a rule is broken.

    A failure with a category also moves the item's assignment to that
    category as the reviewer's decision, which cluster runs never undo. The
    reviewer's lock on the item is released, and the change is audited.
    `queue`: the key of the review queue the label was given in; the audit
    event keeps it, so the queue's progress still counts an item the label
    moved out of it.
    """
    if verdict not in Label.Verdict.values:
        raise LabelRefused(f"unknown verdict {verdict!r}", field="verdict")
    if split not in Label.Split.values:
        raise LabelRefused(f"unknown split {split!r}", field="split")
    if severity and severity not in FeedbackItem.Severity.values:
        raise LabelRefused(f"unknown severity {severity!r}", field="severity")
    if len(hint) > HINT_MAX_LENGTH:
        raise LabelRefused(f"the hint is longer than {HINT_MAX_LENGTH} characters", field="hint")
    # A category names what failed; on any other verdict it would only
    # mislead the category counts and the exports.
    if verdict != Label.Verdict.FAILURE:
        category = None
    now = timezone.now()
    with transaction.atomic():
        if category is not None:
            # Re-read under a lock: a merge or archive may have landed since the form was checked.
            category = Category.objects.select_for_update().filter(id=category.id).first()
            if category is None or not category.is_open:
                raise LabelRefused("that category no longer exists or was merged or archived", field="category")
        label = Label.objects.select_for_update().filter(item=item, reviewer=reviewer).first()
        created = label is None
        before = _label_values(label)
        assignment_before = _assignment_values(item)
        status_before = FeedbackItem.objects.filter(id=item.id).values_list("status", flat=True).first()
        if label is None:
            label = Label(item=item, reviewer=reviewer, created_at=now)
        label.verdict = verdict
        label.category = category
        label.severity = severity
        label.tags = list(dict.fromkeys(tags))
        label.hint = hint
        label.corrected_response = corrected_response
        label.split = split
        after = _label_values(label)
        changes = {name: (before.get(name), value) for name, value in after.items() if before.get(name) != value}
        if created or changes:
            label.updated_at = now
            label.save()

        moved_from = _assignment_move(item=item, reviewer=reviewer, category=category, now=now) if category else None
        ReviewLock.objects.filter(item=item, reviewer=reviewer).delete()

        if created or changes or moved_from is not None:
            details = {
                "verdict": label.verdict,
                "category": _category_text(category),
                "split": label.split,
                "changed": "new label" if created else ", ".join(name.removesuffix("_id") for name in changes),
            }
            if moved_from is not None:
                details["assignment"] = f"{moved_from} → {_category_text(category)}"
            if queue:
                details["queue"] = queue
            audit_record(actor=reviewer, action="labelled", item=item, details=details)
    undo = {}
    if created or changes or moved_from is not None:
        undo = {
            "item": item.id,
            "label": label.id,
            "label_updated_at": label.updated_at.isoformat(),
            "saved_at": now.isoformat(),
            "label_before": None if created else before,
            "assignment_before": assignment_before if moved_from is not None else "unchanged",
            "status_before": status_before,
            "queue": queue,
        }
    return LabelSaved(
        label=label, created=created, changes=changes, assignment_moved=moved_from is not None, undo=undo
    )


def _assignment_values(item: FeedbackItem) -> dict[str, Any] | None:
    row = (
        Assignment.objects.filter(item=item)
        .values("category_id", "area_id", "confidence", "assigned_by", "reviewer_id", "run_id")
        .first()
    )
    return dict(row) if row else None


def label_undo(*, reviewer, undo: dict[str, Any], now: datetime | None = None) -> Label | None:
    """Put an item back as it was before the reviewer's last save; the restored label, or None if it was new.

    `undo` is LabelSaved.undo. Refused (LabelRefused) once UNDO_SECONDS have
    passed, or when the label or the assignment changed since the save (by
    another save, another reviewer or a merge): undo never overwrites a
    decision it did not make. Audited.
    """
    now = now or timezone.now()
    try:
        saved_at = datetime.fromisoformat(undo["saved_at"])
        item_id, label_id = int(undo["item"]), int(undo["label"])
    except (KeyError, TypeError, ValueError):
        raise LabelRefused("there is nothing to undo") from None
    if now - saved_at > timedelta(seconds=UNDO_SECONDS):
        raise LabelRefused(f"undo is only possible for {UNDO_SECONDS} seconds after a save")
    with transaction.atomic():
        label = Label.objects.select_for_update().filter(id=label_id, item_id=item_id, reviewer=reviewer).first()
        if label is None or label.updated_at.isoformat() != undo["label_updated_at"]:
            raise LabelRefused("the label changed since that save, so it was not undone")
        item = FeedbackItem.objects.select_for_update().get(id=item_id)
        assignment_before = undo.get("assignment_before", "unchanged")
        if assignment_before != "unchanged":
            assignment = Assignment.objects.select_for_update(of=("self",)).filter(item=item).first()
            made_by_save = (
                assignment is not None
                and assignment.assigned_by == Assignment.By.REVIEWER
                and assignment.reviewer_id == reviewer.id
                and assignment.category_id == label.category_id
            )
            if not made_by_save:
                raise LabelRefused("the item's category changed since that save, so it was not undone")
            _assignment_restore(item=item, assignment=assignment, values=assignment_before, now=now)
            status_before = undo.get("status_before")
            if status_before and status_before != item.status and item.status == FeedbackItem.Status.ASSIGNED:
                FeedbackItem.objects.filter(id=item.id).update(status=status_before, status_changed_at=now)
        before = undo.get("label_before")
        restored = None
        if before is None:
            label.delete()
        else:
            for name, value in before.items():
                setattr(label, name, value)
            label.updated_at = now
            label.save()
            restored = label
        audit_record(
            actor=reviewer,
            action="undid label",
            item=item,
            details={"label": "removed (it was new)" if before is None else "restored as before the save"},
        )
    return restored


def _assignment_restore(*, item: FeedbackItem, assignment: Assignment, values: dict | None, now: datetime) -> None:
    """Give the item back the assignment it had, keeping the category sizes in step."""
    moved_to = assignment.category_id
    if values is None:
        assignment.delete()
        back_to = None
    else:
        for name, value in values.items():
            setattr(assignment, name, value)
        assignment.updated_at = now
        assignment.save()
        back_to = values.get("category_id")
    if moved_to != back_to:
        if moved_to is not None:
            Category.objects.filter(id=moved_to, size__gt=0).update(size=F("size") - 1)
        if back_to is not None:
            Category.objects.filter(id=back_to).update(size=F("size") + 1)


def _assignment_move(*, item: FeedbackItem, reviewer, category: Category, now: datetime) -> str | None:
    """Make the reviewer's category the item's assignment; what it was before, or None if unchanged."""
    assignment = (
        Assignment.objects.select_for_update(of=("self",)).select_related("category").filter(item=item).first()
    )
    if (
        assignment is not None
        and assignment.category_id == category.id
        and assignment.assigned_by == Assignment.By.REVIEWER
    ):
        return None
    old_category = assignment.category if assignment else None
    if assignment is None:
        assignment = Assignment(item=item)
    assignment.category = category
    # The model's similarity no longer describes a person's decision.
    assignment.confidence = None
    assignment.assigned_by = Assignment.By.REVIEWER
    assignment.reviewer = reviewer
    assignment.updated_at = now
    assignment.save()
    if old_category is None or old_category.id != category.id:
        if old_category is not None:
            Category.objects.filter(id=old_category.id, size__gt=0).update(size=F("size") - 1)
        Category.objects.filter(id=category.id).update(size=F("size") + 1)
    if item.status == FeedbackItem.Status.EMBEDDED:
        # Only an embedded item moves on; one still waiting for its vector
        # must stay where the pipeline will find it.
        FeedbackItem.objects.filter(id=item.id, status=FeedbackItem.Status.EMBEDDED).update(
            status=FeedbackItem.Status.ASSIGNED, status_changed_at=now
        )
    return _category_text(old_category)


# --- Review locks -------------------------------------------------------------------


def review_lock_take(*, item_id: int, reviewer, now: datetime | None = None) -> bool:
    """Lock an item for the reviewer; False if another reviewer holds a live lock.

    Race-free on every database: an expired lock is taken over by a
    conditional UPDATE (a second writer re-checks the condition and finds the
    lock live), and a missing one by an INSERT that the unique item column
    lets only one reviewer win.
    """
    now = now or timezone.now()
    expires_at = now + timedelta(minutes=LOCK_MINUTES)
    with transaction.atomic():
        taken = (
            ReviewLock.objects.filter(item_id=item_id)
            .filter(Q(expires_at__lte=now) | Q(reviewer=reviewer))
            .update(reviewer=reviewer, expires_at=expires_at)
        )
        if taken:
            return True
        try:
            with transaction.atomic():
                ReviewLock.objects.create(item_id=item_id, reviewer=reviewer, expires_at=expires_at)
        except IntegrityError:
            return False
    return True


def review_locks_release(*, reviewer, item_id: int | None = None, keep_item_id: int | None = None) -> int:
    """Drop the reviewer's locks (one item's, or all but one); how many were dropped."""
    locks = ReviewLock.objects.filter(reviewer=reviewer)
    if item_id is not None:
        locks = locks.filter(item_id=item_id)
    if keep_item_id is not None:
        locks = locks.exclude(item_id=keep_item_id)
    return locks.delete()[0]


def review_next_take(*, reviewer, candidates, now: datetime | None = None) -> int | None:
    """Lock the first candidate item id nobody else holds; its id, or None when all are taken.

    The reviewer keeps one lock at a time, so moving on frees the last item.
    """
    now = now or timezone.now()
    for item_id in candidates:
        if review_lock_take(item_id=item_id, reviewer=reviewer, now=now):
            review_locks_release(reviewer=reviewer, keep_item_id=item_id)
            return item_id
    return None


# --- Double review ------------------------------------------------------------------


def double_reviews_request(
    *, requested_by, count: int, category: Category | None = None, rng: random.Random | None = None
) -> list[DoubleReview]:
    """Pick a random sample of labelled items for a second, independent review.

    Only items that already carry a label are sampled: agreement compares a
    second review with a first, and an item already in the sample is not
    picked again.
    """
    if count < 1:
        raise ValueError("count must be at least 1")
    pool = FeedbackItem.objects.filter(labels__isnull=False, double_review__isnull=True)
    if category is not None:
        pool = pool.filter(Q(assignment__category=category) | Q(labels__category=category))
    item_ids = sorted(set(pool.values_list("id", flat=True)))
    chosen = (rng or random.SystemRandom()).sample(item_ids, min(count, len(item_ids)))
    now = timezone.now()
    with transaction.atomic():
        DoubleReview.objects.bulk_create(
            [DoubleReview(item_id=item_id, requested_by=requested_by, created_at=now) for item_id in sorted(chosen)],
            ignore_conflicts=True,
        )
        created = list(DoubleReview.objects.filter(item_id__in=chosen, created_at=now, requested_by=requested_by))
        if created:
            audit_record(
                actor=requested_by,
                action="requested double review",
                category=category,
                details={"items": len(created), "asked for": count},
            )
    return created


# --- Settling a dispute -------------------------------------------------------------


class SettlementRefused(Exception):
    """A settlement that cannot be made; `status` is the HTTP answer that fits (403, 404, 409, 422)."""

    def __init__(self, message: str, *, status: int, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.field = field


def _label_text(label: Label) -> str:
    return f"{label.reviewer.get_username()}'s label"


def dispute_settle(
    *,
    item_id: int,
    label_id: int,
    settled_by,
    verdict: str | None = None,
    category_id: int | None = None,
    seen: str | None = None,
) -> Settlement:
    """Settle which judgement is the truth for an item whose reviewers disagree.

    The settlement keeps the label `label_id` (its hint, tags, severity,
    corrected response and split), with `verdict` and `category_id` in place
    of its own when given. `seen`: that label's updated_at as the settler saw
    it; a label changed since is refused rather than settled unseen. The
    item's labels are locked, so of two people settling at once the second
    finds it settled and is told so. A failure with a category also becomes
    the item's assignment, as a reviewer's decision. Audited.
    """
    # Imported here: the selectors import this module for its constants.
    from labeling.review.agreement import (
        labels_disagree,
        labels_fingerprint,
        may_settle,
        settlement_holds,
    )

    with transaction.atomic():
        labels = list(
            Label.objects.select_for_update(of=("self",))
            .select_related("reviewer")
            .filter(item_id=item_id)
            .order_by("created_at", "id")
        )
        if not labels:
            raise SettlementRefused("no such item, or it has no labels", status=404, field="item")
        if not may_settle(settled_by, labels):
            raise SettlementRefused(
                "you gave one of these labels: an admin or a reviewer who gave neither settles it", status=403
            )
        if not labels_disagree(labels):
            raise SettlementRefused("the reviewers agree on this item: there is nothing to settle", status=409)
        kept = next((label for label in labels if label.id == label_id), None)
        if kept is None:
            raise SettlementRefused("that label is not one of this item's", status=422, field="label")
        if seen is not None and seen != kept.updated_at.isoformat():
            raise SettlementRefused(
                f"{_label_text(kept)} changed since the page was loaded: look at it again", status=409, field="label"
            )
        settlement = (
            Settlement.objects.select_for_update(of=("self",))
            .select_related("settled_by")
            .filter(item_id=item_id)
            .first()
        )
        if settlement_holds(settlement, labels):
            who = settlement.settled_by.get_username() if settlement.settled_by else "someone"
            raise SettlementRefused(f"{who} settled this item already", status=409)

        verdict = verdict or kept.verdict
        if verdict not in Label.Verdict.values:
            raise SettlementRefused(f"unknown verdict {verdict!r}", status=422, field="verdict")
        category = None
        if verdict == Label.Verdict.FAILURE:
            wanted = category_id if category_id is not None else kept.category_id
            if wanted is not None:
                category = Category.objects.select_for_update().open().filter(id=wanted).first()
                if category is None:
                    raise SettlementRefused(
                        "that category no longer exists or was merged or archived", status=422, field="category"
                    )

        now = timezone.now()
        settlement = settlement or Settlement(item_id=item_id)
        reopened = settlement.pk is not None
        settlement.label = kept
        settlement.verdict = verdict
        settlement.category = category
        settlement.severity = kept.severity
        settlement.tags = list(kept.tags)
        settlement.hint = kept.hint
        settlement.corrected_response = kept.corrected_response
        settlement.split = kept.split
        settlement.labels_seen = labels_fingerprint(labels)
        settlement.settled_by = settled_by
        settlement.settled_at = now
        settlement.save()

        item = FeedbackItem.objects.get(id=item_id)
        moved_from = (
            _assignment_move(item=item, reviewer=settled_by, category=category, now=now) if category else None
        )
        details = {
            "verdict": verdict,
            "category": _category_text(category),
            "kept": _label_text(kept),
            "labels": "; ".join(
                f"{_label_text(label)}: {label.verdict}"
                + (f", category #{label.category_id}" if label.category_id else "")
                for label in labels
            ),
        }
        if verdict != kept.verdict or (category.id if category else None) != kept.category_id:
            details["changed"] = "verdict or category written by the settler"
        if reopened:
            details["reopened"] = "a label changed after the earlier settlement"
        if moved_from is not None:
            details["assignment"] = f"{moved_from} → {_category_text(category)}"
        audit_record(actor=settled_by, action="settled dispute", item=item, category=category, details=details)
    return settlement


def original_revealed(*, item: FeedbackItem, user) -> None:
    """Record that `user` read the item's original, unscrubbed text (every reveal is on the audit trail)."""
    audit_record(actor=user, action="revealed original", item=item)
