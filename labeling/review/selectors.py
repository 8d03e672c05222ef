"""Reads of the item page: the item, its labels, suggested categories, similar items, its neighbours."""

from dataclasses import dataclass

import numpy as np
from django.db.models import (
    BooleanField,
    Case,
    Exists,
    OuterRef,
    Q,
    Value,
    When,
)

from core.ordering import earlier_than, later_than
from core.roles import is_admin
from feedback import custom_patterns
from feedback import selectors as feedback_selectors
from feedback.models import FeedbackItem
from feedback.scrubber import scrub
from feedback.text import embeddable_text
from labeling.audit import audit_trail
from labeling.models import (
    Assignment,
    AuditEvent,
    Category,
    DoubleReview,
    Label,
    ReviewLock,
)

SUGGESTED_MAX = 9
SIMILAR_K = 8


def label_previous_item_id(*, reviewer, item_id: int) -> int | None:
    """The item this reviewer labelled before the given one (or last, if it has no label of theirs)."""
    labels = Label.objects.filter(reviewer=reviewer).exclude(item_id=item_id)
    current = Label.objects.filter(reviewer=reviewer, item_id=item_id).values_list("updated_at", "id").first()
    if current is not None:
        updated_at, label_id = current
        labels = labels.filter(earlier_than("updated_at", updated_at, label_id))
    return labels.order_by("-updated_at", "-id").values_list("item_id", flat=True).first()


def item_neighbour_ids(*, item: FeedbackItem) -> tuple[int | None, int | None]:
    """(previous, next) item ids in the order of the item lists: newest first."""
    newer = later_than("received_at", item.received_at, item.id)
    older = earlier_than("received_at", item.received_at, item.id)
    previous = FeedbackItem.objects.filter(newer).order_by("received_at", "id").values_list("id", flat=True).first()
    following = FeedbackItem.objects.filter(older).order_by("-received_at", "-id").values_list("id", flat=True).first()
    return previous, following


def item_for_review(*, item_id: int) -> FeedbackItem | None:
    """The item with everything its page shows beside it, in one query."""
    return (
        FeedbackItem.objects.select_related(
            "source",
            "embedding",
            "assignment__category",
            "assignment__reviewer",
            "review_lock__reviewer",
            "double_review",
        )
        .filter(id=item_id)
        .first()
    )


def item_labels(*, item: FeedbackItem) -> list[Label]:
    return list(Label.objects.filter(item=item).select_related("reviewer", "category").order_by("created_at", "id"))


def categories_open() -> list[Category]:
    """Categories a reviewer may pick, with their centroids, biggest first."""
    return list(Category.objects.open().only("id", "name", "status", "size", "centroid"))


@dataclass(frozen=True)
class Suggestion:
    number: int
    category: Category
    similarity: float | None
    current: bool


def categories_suggested(
    *, item: FeedbackItem, categories: list[Category], limit: int = SUGGESTED_MAX, hide_current: bool = False
) -> list[Suggestion]:
    """Up to ``limit`` categories for the number keys: the current one, then the nearest.

    Nearness is the cosine between the item's vector and each centroid (both
    are L2-normalised float32). Without a vector, the biggest categories
    follow, so the keys still do something useful. `hide_current`: the current
    category is a first reviewer's choice a blind second review must not see.
    """
    assignment = item_assignment(item)
    current_id = assignment.category_id if assignment and not hide_current else None
    vector = np.frombuffer(item.embedding.vector, dtype=np.float32) if item.embedding_id else None
    scored: list[tuple[float | None, Category]] = []
    for category in categories:
        similarity = None
        if vector is not None and category.centroid is not None:
            centroid = np.frombuffer(category.centroid, dtype=np.float32)
            if centroid.shape == vector.shape:
                similarity = float(centroid @ vector)
        scored.append((similarity, category))
    # Categories with a similarity first (nearest first), then by size: the
    # list is already biggest first and sort() is stable.
    scored.sort(key=lambda pair: (pair[0] is None, -(pair[0] or 0.0)))
    current = [pair for pair in scored if pair[1].id == current_id]
    rest = [pair for pair in scored if pair[1].id != current_id]
    return [
        Suggestion(number=n, category=category, similarity=similarity, current=category.id == current_id)
        for n, (similarity, category) in enumerate((current + rest)[:limit], start=1)
    ]


def item_assignment(item: FeedbackItem) -> Assignment | None:
    """The item's assignment, or None (a reverse one-to-one raises instead)."""
    try:
        return item.assignment
    except Assignment.DoesNotExist:
        return None


def item_lock(item: FeedbackItem) -> ReviewLock | None:
    try:
        return item.review_lock
    except ReviewLock.DoesNotExist:
        return None


def labels_hidden_from(viewer) -> Q:
    """Items whose labels `viewer` must not see yet: a blind second review of theirs is still to come.

    An item sampled for double review that someone else has labelled and
    `viewer` has not: every list and filter treats its labels (and the
    category a reviewer gave it) as unknown to `viewer`, as the item page does.
    """
    labels = Label.objects.filter(item=OuterRef("pk"))
    return (
        Q(double_review__isnull=False)
        & Exists(labels.exclude(reviewer=viewer))
        & ~Exists(labels.filter(reviewer=viewer))
    )


def item_in_double_review(item: FeedbackItem) -> bool:
    try:
        return item.double_review is not None
    except DoubleReview.DoesNotExist:
        return False


@dataclass(frozen=True)
class ReviewerView:
    """What one reviewer may see of an item's labels.

    A second review must be independent: until this reviewer has given
    theirs, nothing on the page tells what the first reviewer decided (their
    label, their history, and the category they moved the item to).
    """

    my_label: Label | None
    others: list[Label]
    assignment: Assignment | None
    blind: bool
    hide_category: bool


def item_view_for(*, item: FeedbackItem, reviewer) -> ReviewerView:
    labels = item_labels(item=item)
    my_label = next((label for label in labels if label.reviewer_id == reviewer.id), None)
    others = [label for label in labels if label.reviewer_id != reviewer.id]
    blind = item_in_double_review(item) and my_label is None and bool(others)
    assignment = item_assignment(item)
    by_reviewer = assignment is not None and assignment.assigned_by == assignment.By.REVIEWER
    return ReviewerView(
        my_label=my_label, others=others, assignment=assignment, blind=blind, hide_category=blind and by_reviewer
    )


def item_history(*, item: FeedbackItem, viewer, blind: bool) -> list[AuditEvent]:
    """The item's audit trail; in a blind second review, without what other reviewers did."""
    events = audit_trail(item=item)
    if blind:
        return [event for event in events if event.actor_id in (None, viewer.id)]
    return list(events)


@dataclass(frozen=True)
class SimilarItem:
    item: FeedbackItem
    similarity: float
    # The scrubbed line the panel shows for it.
    preview: str = ""
    # A reviewer chose its category and the viewer still owes it a blind second review.
    category_hidden: bool = False

    @property
    def percent(self) -> int:
        return round(100 * self.similarity)


def items_similar(*, item_id: int, k: int = SIMILAR_K, viewer=None) -> list[SimilarItem]:
    """The k nearest items with what their rows show, in one query after the index search.

    With a non-admin `viewer`, a neighbour's category stays hidden where a
    reviewer chose it and `viewer` still owes that item a blind second review.
    """
    neighbours = feedback_selectors.similar_items(item_id=item_id, k=k)
    if not neighbours:
        return []
    rows = FeedbackItem.objects.select_related("assignment__category").defer("raw_payload", "context")
    if viewer is not None and not is_admin(viewer):
        hidden = labels_hidden_from(viewer) & Q(assignment__assigned_by=Assignment.By.REVIEWER)
        rows = rows.annotate(
            category_hidden=Case(When(hidden, then=Value(True)), default=Value(False), output_field=BooleanField())
        )
    rows = rows.in_bulk([n.item_id for n in neighbours])
    return [
        SimilarItem(
            item=rows[n.item_id],
            similarity=n.similarity,
            preview=item_snippet(rows[n.item_id], or_embedded_text=True),
            category_hidden=getattr(rows[n.item_id], "category_hidden", False),
        )
        for n in neighbours
        if n.item_id in rows
    ]


def item_snippet(item: FeedbackItem, *, or_embedded_text: bool = False) -> str:
    """The line lists show for an item (title, else comment), scrubbed."""
    text = item.title or item.comment or (item.embed_text if or_embedded_text else "")
    return _scrubbed(text)


def item_evidence(item: FeedbackItem) -> str:
    """For an item without a title or comment: the evidence its text is made of (a tool error, the end of the
    output), scrubbed but not masked, so it reads as the run said it. Empty when the context was not loaded."""
    if item.title or item.comment or "context" in item.get_deferred_fields():
        return ""
    return _scrubbed(embeddable_text(item))


def _scrubbed(text: str) -> str:
    return scrub(text[:1000], extra_patterns=custom_patterns.all_sources()).text if text else ""
