"""Bulk actions: one change to many items, recorded as one audited, undoable event.

Each action resolves its selection (labeling.bulk.selectors), reads what the
items look like now in one query, writes with a few set-based statements
(UPDATE ... WHERE id IN, and multi-row VALUES lists: labeling.bulk.sql), never a query per item,
and keeps the values it replaced column-wise on the `BulkAction` row. An undo
puts back only what still holds the value the action wrote: an item someone
changed since keeps that later change, and the undo says how many it left.

The actions that write a label (verdict, tags, split) write the acting
reviewer's own label, as the label form does: a label is a person's
judgement, so an API token, which is no person, may not make them."""

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.apps import apps
from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.audit import audit_record
from labeling.bulk.selectors import Selection, SelectionRefused, selection_resolve
from labeling.bulk.sql import rows_insert
from labeling.models import (
    Assignment,
    AuditEvent,
    BulkAction,
    Category,
    DatasetPin,
    DoubleReview,
    Label,
)
from labeling.review.services import LABEL_TAGS, OTHER_TAG_MAX_LENGTH, OTHER_TAGS_MAX

Kind = BulkAction.Kind
LABEL_KINDS = (Kind.VERDICT, Kind.TAGS_ADD, Kind.TAGS_REMOVE, Kind.SPLIT)

# Keeps every statement far below SQLite's 32,766 parameters and PostgreSQL's 65,535.
CHUNK = 5000
QUEUES = ("double",)


class BulkRefused(Exception):
    """A bulk action that cannot be done; nothing was written. `status` is the HTTP answer that fits."""

    def __init__(self, message: str, *, status: int, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.field = field


@dataclass(frozen=True)
class BulkParams:
    kind: str
    category_id: int | None = None
    verdict: str = ""
    tags: tuple[str, ...] = ()
    split: str = ""
    dataset_id: int | None = None
    queue: str = "double"


@dataclass(frozen=True)
class UndoResult:
    action: BulkAction
    restored: int
    # Items changed again since the action: left as they are.
    kept: int


def id_chunks(ids: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


def _category_text(category: Category | None) -> str:
    return f"“{category.name}” (#{category.id})" if category else "none"


def _plural(n: int, noun: str = "item") -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _clean_tags(tags: Iterable[str]) -> tuple[str, ...]:
    cleaned = tuple(dict.fromkeys(" ".join(str(tag).split()) for tag in tags if str(tag).strip()))
    if not cleaned:
        raise BulkRefused("name at least one tag", status=422, field="tags")
    if len(cleaned) > len(LABEL_TAGS) + OTHER_TAGS_MAX:
        raise BulkRefused(f"at most {len(LABEL_TAGS) + OTHER_TAGS_MAX} tags at once", status=422, field="tags")
    for tag in cleaned:
        if len(tag) > OTHER_TAG_MAX_LENGTH and tag not in LABEL_TAGS:
            raise BulkRefused(f"a tag has at most {OTHER_TAG_MAX_LENGTH} characters", status=422, field="tags")
        if "\x00" in tag:
            raise BulkRefused("a tag may not hold a NUL character", status=422, field="tags")
    return cleaned


def _check_params(params: BulkParams, *, actor) -> BulkParams:
    """Refuse a broken request before anything is read: the first bad field, 422 (403 for a token)."""
    if params.kind not in Kind.values or params.kind == Kind.MERGE:
        choices = ", ".join(kind for kind in Kind.values if kind != Kind.MERGE)
        raise BulkRefused(f"action must be one of {choices}", status=422, field="action")
    if params.kind in LABEL_KINDS and actor is None:
        raise BulkRefused(
            "labels are a reviewer's judgement: set verdicts, tags and splits from a reviewer's session, not a token",
            status=403,
            field="action",
        )
    if params.kind == Kind.MOVE and params.category_id is None:
        raise BulkRefused("choose the category to move the items to", status=422, field="category")
    if params.kind == Kind.VERDICT and params.verdict not in Label.Verdict.values:
        raise BulkRefused(f"verdict must be one of {', '.join(Label.Verdict.values)}", status=422, field="verdict")
    if params.kind == Kind.SPLIT and params.split not in Label.Split.values:
        raise BulkRefused(f"split must be one of {', '.join(Label.Split.values)}", status=422, field="split")
    if params.kind in (Kind.TAGS_ADD, Kind.TAGS_REMOVE):
        params = BulkParams(**{**vars(params), "tags": _clean_tags(params.tags)})
    if params.kind == Kind.PIN and params.dataset_id is None:
        raise BulkRefused("choose the dataset to pin the items to", status=422, field="dataset")
    if params.kind == Kind.QUEUE and params.queue not in QUEUES:
        raise BulkRefused(f"queue must be one of {', '.join(QUEUES)}", status=422, field="queue")
    return params


def sizes_refresh(category_ids: Iterable[int]) -> None:
    """Recount the sizes of these categories in one statement."""
    ids = sorted({category_id for category_id in category_ids if category_id is not None})
    if not ids:
        return
    counts = (
        Assignment.objects.filter(category=OuterRef("pk"))
        .order_by()
        .values("category")
        .annotate(n=Count("id"))
        .values("n")
    )
    Category.objects.filter(id__in=ids).update(size=Coalesce(Subquery(counts, output_field=IntegerField()), Value(0)))


def stamp(moment: datetime) -> str:
    return moment.isoformat()


def unstamp(text: str) -> datetime:
    return datetime.fromisoformat(text)


def bulk_apply(
    *,
    params: BulkParams,
    selection: Selection,
    actor,
    made_by: str,
    origin: str = "",
    viewer=None,
    token_source_id: int | None = None,
) -> BulkAction:
    """Do one bulk action on the selected items; returns its record. BulkRefused/SelectionRefused change nothing.

    Steps: check the parameters; resolve the selection (the ids, or the
    page's filter as `viewer` sees it); lock and check the target; read the
    items' current values once; write in set-based statements; record the
    previous values and one audit event, all in one transaction.
    """
    params = _check_params(params, actor=actor)
    with transaction.atomic():
        ids = selection_resolve(selection=selection, viewer=viewer if viewer is not None else actor)
        now = timezone.now()
        action = BulkAction(
            kind=params.kind,
            actor=actor,
            made_by=made_by,
            origin=origin[:40],
            item_count=len(ids),
            created_at=now,
        )
        if origin.startswith("category:"):
            action.category_id = _origin_id(origin)
        elif origin.startswith("area:"):
            action.area_id = _origin_id(origin)
        # Saved first so that what the action creates (pins) can point at it.
        action.save()
        _APPLY[params.kind](action, ids, params, now)
        if token_source_id is not None:
            action.params["token_source"] = token_source_id
        action.save()
        event = audit_record(
            actor=actor,
            action=f"bulk: {action.get_kind_display().lower()}",
            category=action.category,
            area=action.area,
            details={"items": len(ids), "what": action.summary, "by": made_by, "bulk action": action.id},
        )
        action.audit_event = event
        action.save(update_fields=["audit_event"])
    return action


def _origin_id(origin: str) -> int | None:
    tail = origin.partition(":")[2]
    return int(tail) if tail.isascii() and tail.isdigit() and len(tail) < 19 else None


def _apply_move(action: BulkAction, ids: list[int], params: BulkParams, now: datetime) -> None:
    target = Category.objects.select_for_update().filter(id=params.category_id).first()
    if target is None:
        raise BulkRefused("that category does not exist", status=404, field="category")
    if not target.is_open:
        raise BulkRefused(
            f"“{target.name}” is {target.get_status_display().lower()}; move items into a proposed or confirmed category",
            status=409,
            field="category",
        )
    rows = []
    for chunk in id_chunks(ids):
        rows += Assignment.objects.filter(item_id__in=chunk).values_list(
            "item_id", "category_id", "area_id", "assigned_by", "reviewer_id", "confidence", "run_id"
        )
    having = {row[0] for row in rows}
    # An item already placed there by a reviewer does not change.
    changed = [row for row in rows if not (row[1] == target.id and row[3] == Assignment.By.REVIEWER)]
    created = [item_id for item_id in ids if item_id not in having]
    changed_ids = [row[0] for row in changed]
    embedded = []
    for chunk in id_chunks(sorted(changed_ids + created)):
        embedded += FeedbackItem.objects.filter(id__in=chunk, status=FeedbackItem.Status.EMBEDDED).values_list(
            "id", flat=True
        )
    for chunk in id_chunks(changed_ids):
        Assignment.objects.filter(item_id__in=chunk).update(
            category=target,
            area_id=target.area_id,
            assigned_by=Assignment.By.REVIEWER,
            reviewer=action.actor,
            confidence=None,
            run=None,
            updated_at=now,
        )
    rows_insert(
        Assignment,
        ("item_id", "category_id", "area_id", "assigned_by", "reviewer_id", "confidence", "run_id", "updated_at"),
        [(item_id, target.id, target.area_id, Assignment.By.REVIEWER, action.actor_id, None, None, now) for item_id in created],
    )
    # Only an embedded item moves on; one still waiting for its vector stays where the pipeline finds it.
    for chunk in id_chunks(list(embedded)):
        FeedbackItem.objects.filter(id__in=chunk, status=FeedbackItem.Status.EMBEDDED).update(
            status=FeedbackItem.Status.ASSIGNED, status_changed_at=now
        )
    sizes_refresh([target.id, *(row[1] for row in changed)])
    action.category = target
    action.params = {"category": target.id, "category_name": target.name}
    action.item_count = len(changed) + len(created)
    action.summary = f"moved {_plural(action.item_count)} to {_category_text(target)}"
    if len(ids) > action.item_count:
        action.summary += f" ({_plural(len(ids) - action.item_count)} already there)"
    action.undo = {
        "at": stamp(now),
        "target": target.id,
        "ids": changed_ids,
        "category": [row[1] for row in changed],
        "area": [row[2] for row in changed],
        "by": [row[3] for row in changed],
        "reviewer": [row[4] for row in changed],
        "confidence": [row[5] for row in changed],
        "run": [row[6] for row in changed],
        "created": created,
        "embedded": list(embedded),
    }


def _own_labels(ids: list[int], actor) -> list[tuple]:
    rows = []
    for chunk in id_chunks(ids):
        rows += Label.objects.filter(item_id__in=chunk, reviewer=actor).values_list(
            "id", "item_id", "verdict", "category_id", "tags", "split", "updated_at"
        )
    return rows


def _update_grouped(updates: dict[tuple, list[int]], fields: tuple[str, ...], now: datetime) -> None:
    """One UPDATE per distinct new value (a handful), not one per label."""
    for values, label_ids in updates.items():
        new = {name: (list(value) if name == "tags" else value) for name, value in zip(fields, values)}
        for chunk in id_chunks(label_ids):
            Label.objects.filter(id__in=chunk).update(**new, updated_at=now)


def _apply_verdict(action: BulkAction, ids: list[int], params: BulkParams, now: datetime) -> None:
    verdict = params.verdict
    labels = _own_labels(ids, action.actor)
    # A failure is filed under the item's category; any other verdict has none (as the label form says).
    categories: dict[int, int] = {}
    if verdict == Label.Verdict.FAILURE:
        for chunk in id_chunks(ids):
            categories.update(
                Assignment.objects.filter(item_id__in=chunk, category__status__in=Category.OPEN_STATUSES).values_list(
                    "item_id", "category_id"
                )
            )
    labelled = {row[1] for row in labels}
    created = [item_id for item_id in ids if item_id not in labelled]
    updates: dict[tuple, list[int]] = defaultdict(list)
    changed = []
    for label_id, item_id, old_verdict, old_category, _tags, _split, _updated in labels:
        category = (old_category or categories.get(item_id)) if verdict == Label.Verdict.FAILURE else None
        if (old_verdict, old_category) != (verdict, category):
            updates[(verdict, category)].append(label_id)
            changed.append((label_id, old_verdict, old_category, _updated))
    _update_grouped(updates, ("verdict", "category_id"), now)
    rows_insert(
        Label,
        ("item_id", "reviewer_id", "category_id", "verdict", "severity", "tags", "hint", "corrected_response", "split",
         "created_at", "updated_at"),
        [
            (item_id, action.actor_id, categories.get(item_id), verdict, "", [], "", "", Label.Split.NONE, now, now)
            for item_id in created
        ],
    )
    action.params = {"verdict": verdict}
    action.item_count = len(changed) + len(created)
    action.summary = f"set the verdict “{Label.Verdict(verdict).label}” on {_plural(action.item_count)}"
    if created:
        action.summary += f" ({len(created):,} new labels)"
    action.undo = {
        "at": stamp(now),
        "created": created,
        "ids": [row[0] for row in changed],
        "verdict": [row[1] for row in changed],
        "category": [row[2] for row in changed],
        "updated_at": [stamp(row[3]) for row in changed],
    }


def _labels_required(ids: list[int], labels: list[tuple]) -> None:
    missing = len(ids) - len({row[1] for row in labels})
    if missing:
        raise BulkRefused(
            f"{_plural(missing)} of the selection {'has' if missing == 1 else 'have'} no label of yours yet: "
            "set a verdict on them first",
            status=422,
            field="items",
        )


def _label_field_undo(field: str, changed: list[tuple[int, Any, datetime]], now: datetime) -> dict:
    """What puts one field of the changed labels back: (label id, old value, old updated_at) per label."""
    return {
        "at": stamp(now),
        "ids": [row[0] for row in changed],
        field: [row[1] for row in changed],
        "updated_at": [stamp(row[2]) for row in changed],
    }


def _apply_tags(action: BulkAction, ids: list[int], params: BulkParams, now: datetime) -> None:
    adding = params.kind == Kind.TAGS_ADD
    labels = _own_labels(ids, action.actor)
    _labels_required(ids, labels)
    updates: dict[tuple, list[int]] = defaultdict(list)
    changed = []
    for label_id, _item, _verdict, _category, tags, _split, updated_at in labels:
        tags = list(tags or [])
        new = tags + [tag for tag in params.tags if tag not in tags] if adding else [
            tag for tag in tags if tag not in params.tags
        ]
        if new != tags:
            updates[(tuple(new),)].append(label_id)
            changed.append((label_id, tags, updated_at))
    _update_grouped(updates, ("tags",), now)
    action.params = {"tags": list(params.tags)}
    action.item_count = len(changed)
    names = ", ".join(f"“{tag}”" for tag in params.tags)
    action.summary = f"{'added' if adding else 'removed'} {names} {'on' if adding else 'from'} {_plural(len(changed))}"
    action.undo = _label_field_undo("tags", changed, now)


def _apply_split(action: BulkAction, ids: list[int], params: BulkParams, now: datetime) -> None:
    labels = _own_labels(ids, action.actor)
    _labels_required(ids, labels)
    changed = [(row[0], row[5], row[6]) for row in labels if row[5] != params.split]
    _update_grouped({(params.split,): [row[0] for row in changed]} if changed else {}, ("split",), now)
    action.params = {"split": params.split}
    action.item_count = len(changed)
    action.summary = f"set the intended split “{Label.Split(params.split).label}” on {_plural(len(changed))}"
    action.undo = _label_field_undo("split", changed, now)


def _apply_pin(action: BulkAction, ids: list[int], params: BulkParams, now: datetime) -> None:
    dataset = apps.get_model("exports", "Dataset").objects.filter(id=params.dataset_id).first()
    if dataset is None:
        raise BulkRefused("that dataset does not exist", status=404, field="dataset")
    pinned = set()
    for chunk in id_chunks(ids):
        pinned.update(
            DatasetPin.objects.filter(dataset_id=dataset.id, item_id__in=chunk).values_list("item_id", flat=True)
        )
    new = [item_id for item_id in ids if item_id not in pinned]
    rows_insert(
        DatasetPin,
        ("dataset_id", "item_id", "pinned_by_id", "bulk_action_id", "pinned_at"),
        [(dataset.id, item_id, action.actor_id, action.id, now) for item_id in new],
    )
    action.params = {"dataset": dataset.id, "dataset_name": dataset.name}
    action.item_count = len(new)
    action.summary = f"pinned {_plural(len(new))} to the dataset “{dataset.name}”"
    if pinned:
        action.summary += f" ({_plural(len(pinned))} pinned already)"
    action.undo = {"at": stamp(now), "dataset": dataset.id, "created": new}


def _apply_queue(action: BulkAction, ids: list[int], params: BulkParams, now: datetime) -> None:
    queued = set()
    for chunk in id_chunks(ids):
        queued.update(DoubleReview.objects.filter(item_id__in=chunk).values_list("item_id", flat=True))
    new = [item_id for item_id in ids if item_id not in queued]
    rows_insert(DoubleReview, ("item_id", "requested_by_id", "created_at"), [(item_id, action.actor_id, now) for item_id in new])
    action.params = {"queue": params.queue}
    action.item_count = len(new)
    action.summary = f"sent {_plural(len(new))} to the double-review queue"
    if queued:
        action.summary += f" ({_plural(len(queued))} there already)"
    action.undo = {"at": stamp(now), "created": new}


_APPLY = {
    Kind.MOVE: _apply_move,
    Kind.VERDICT: _apply_verdict,
    Kind.TAGS_ADD: _apply_tags,
    Kind.TAGS_REMOVE: _apply_tags,
    Kind.SPLIT: _apply_split,
    Kind.PIN: _apply_pin,
    Kind.QUEUE: _apply_queue,
}


def category_merge_undoable(*, category_id: int, target_id: int, user) -> Category:
    """Merge as category_services.category_merge does, and record what an undo needs.

    What a merge moves is read first (the absorbed category's assignments,
    labels and earlier merges), in the same transaction and under the same
    row locks, so the record names exactly what moved.
    """
    from labeling.categories import services as category_services

    with transaction.atomic():
        list(Category.objects.select_for_update().filter(id__in=[category_id, target_id]).order_by("id"))
        items = list(Assignment.objects.filter(category_id=category_id).values_list("item_id", flat=True))
        labels = list(Label.objects.filter(category_id=category_id).values_list("id", flat=True))
        redirected = list(Category.objects.filter(merged_into_id=category_id).values_list("id", flat=True))
        status = Category.objects.filter(id=category_id).values_list("status", flat=True).first()
        target = category_services.category_merge(category_id=category_id, target_id=target_id, user=user)
        source = Category.objects.get(id=category_id)
        now = timezone.now()
        event = AuditEvent.objects.filter(action="merged", category=target).order_by("-id").first()
        BulkAction.objects.create(
            kind=Kind.MERGE,
            actor=user,
            made_by=user.get_username() if user else "",
            origin=f"category:{target.id}",
            category=target,
            params={"source": source.id, "source_name": source.name, "target": target.id, "target_name": target.name},
            summary=f"merged {_category_text(source)} into {_category_text(target)} ({_plural(len(items))})",
            item_count=len(items),
            undo={"at": stamp(now), "status": status, "items": items, "labels": labels, "redirected": redirected},
            audit_event=event,
            created_at=now,
        )
    return target


def refusal_of(exc: SelectionRefused | BulkRefused) -> BulkRefused:
    """Both refusals in one shape for the views."""
    if isinstance(exc, BulkRefused):
        return exc
    return BulkRefused(exc.message, status=exc.status, field=exc.field)
