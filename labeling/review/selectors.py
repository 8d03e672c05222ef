"""Reads of the review workflow: queues, the item page, suggestions, agreement."""

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.db.models import (
    BooleanField,
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)
from sklearn.metrics import cohen_kappa_score

from core.dates import day_start, today_start
from core.ids import id_parse
from core.roles import is_admin
from feedback import custom_patterns
from feedback import selectors as feedback_selectors
from feedback.models import FeedbackItem
from feedback.scrubber import scrub, scrub_json
from labeling.clustering.services import failure_signals
from labeling.models import (
    Assignment,
    AuditEvent,
    Category,
    DoubleReview,
    Label,
    ReviewLock,
    Settlement,
)

SUGGESTED_MAX = 9
SIMILAR_K = 8
# How many unlocked candidates one request tries before it gives up: enough
# to get past the items other reviewers are locking at the same moment.
CANDIDATES_PER_TRY = 25

UNASSIGNED = "unassigned"
DOUBLE = "double"


# --- Queues -------------------------------------------------------------------------


# How a queue hands out its items. The key is what the query string carries.
ORDERS = {
    "oldest": "Oldest first",
    "newest": "Newest first",
    "category": "By area and category",
    "confidence": "Lowest model confidence first",
    "severity": "Most severe first",
}
DEFAULT_ORDER = "oldest"


def order_parse(value: str | None) -> str:
    """An order key from the query string; anything unknown is the default order."""
    value = (value or "").strip()
    return value if value in ORDERS else DEFAULT_ORDER


@dataclass(frozen=True)
class Queue:
    """A source of work: one category, the unassigned failures, or the double-review sample."""

    key: str
    title: str
    category: Category | None = None
    order: str = DEFAULT_ORDER

    @property
    def order_title(self) -> str:
        return ORDERS[self.order]


def queue_parse(*, key: str | None, order: str | None = None) -> Queue | None:
    """The queue a ``category=`` value names, or None if it names none (or a closed category)."""
    key = (key or "").strip()
    order = order_parse(order)
    if key.startswith(FLAG_QUEUE_PREFIX):
        return _flag_queue(key, order)
    if key == UNASSIGNED:
        return Queue(key=UNASSIGNED, title="Unassigned items", order=order)
    if key == DOUBLE:
        return Queue(key=DOUBLE, title="Double review", order=order)
    category_id = id_parse(key)
    if category_id is None:
        return None
    category = Category.objects.open().filter(id=category_id).first()
    if category is None:
        return None
    return Queue(key=str(category.id), title=category.name, category=category, order=order)


FLAG_QUEUE_PREFIX = "flag:"


def _flag_queue(key: str, order: str) -> Queue | None:
    """The queue of one rollout check ("flag:<check>"): items it flagged, waiting for a confirm or dismiss."""
    from rollouts.selectors import (
        check_info,  # rollouts builds on labeling: imported where used
    )

    info = check_info(key.removeprefix(FLAG_QUEUE_PREFIX))
    return Queue(key=key, title=f"Flagged: {info.title}", order=order) if info else None


def _flag_exists(queue: Queue, *, pending_only: bool) -> Exists:
    from rollouts.selectors import STANDING, items_with_flag

    return items_with_flag(
        check_name=queue.key.removeprefix(FLAG_QUEUE_PREFIX), statuses=("pending",) if pending_only else STANDING
    )


def queue_items(*, queue: Queue) -> QuerySet[FeedbackItem]:
    """Every item that belongs to a queue, reviewed or not."""
    if queue.key.startswith(FLAG_QUEUE_PREFIX):
        return FeedbackItem.objects.filter(_flag_exists(queue, pending_only=False))
    if queue.key == UNASSIGNED:
        # Failures no category claims; thumbs-up items are not failures to sort.
        return failure_signals().filter(Q(assignment__isnull=True) | Q(assignment__category__isnull=True))
    if queue.key == DOUBLE:
        return FeedbackItem.objects.filter(double_review__isnull=False)
    return FeedbackItem.objects.filter(assignment__category=queue.category)


def _labelled_by(reviewer) -> Exists:
    return Exists(Label.objects.filter(item=OuterRef("pk"), reviewer=reviewer))


_SEVERITY_RANK = Case(
    *(When(severity=value, then=Value(rank)) for rank, value in enumerate(("critical", "high", "medium", "low"))),
    default=Value(4),
    output_field=IntegerField(),
)


def _ordered(items: QuerySet[FeedbackItem], order: str) -> tuple:
    """The ORDER BY of a queue order; every one ends with a unique column, so paging is stable."""
    if order == "newest":
        return ("-received_at", "-id")
    if order == "category":
        # Area, then category, by name: a reviewer stays in one kind of failure for a while.
        # Unsorted items (no area, no category) come last.
        return (
            F("assignment__category__area__name").asc(nulls_last=True),
            F("assignment__area__name").asc(nulls_last=True),
            F("assignment__category__name").asc(nulls_last=True),
            "received_at",
            "id",
        )
    if order == "confidence":
        # Where the model was least sure its category fits; items without a model score last.
        return (F("assignment__confidence").asc(nulls_last=True), "received_at", "id")
    if order == "severity":
        return ("severity_rank", "received_at", "id")
    return ("received_at", "id")


def queue_open_items(*, queue: Queue, reviewer) -> QuerySet[FeedbackItem]:
    """The items of a queue still waiting for this reviewer, in the queue's order.

    A category or the unassigned queue hands out items nobody has labelled:
    a second opinion is what the double-review queue is for. That queue hands
    out sampled items with fewer than two labels and none from this reviewer,
    those already reviewed once first.
    """
    if queue.key.startswith(FLAG_QUEUE_PREFIX):
        # A flag queue is done when its flags are decided, labelled or not.
        items = FeedbackItem.objects.filter(_flag_exists(queue, pending_only=True))
        if queue.order == "severity":
            items = items.annotate(severity_rank=_SEVERITY_RANK)
        return items.order_by(*_ordered(items, queue.order))
    items = queue_items(queue=queue).exclude(_labelled_by(reviewer))
    if queue.order == "severity":
        items = items.annotate(severity_rank=_SEVERITY_RANK)
    if queue.key == DOUBLE:
        items = items.annotate(label_count=Count("labels")).filter(label_count__lt=2)
        return items.order_by("-label_count", *_ordered(items, queue.order))
    return items.exclude(Exists(Label.objects.filter(item=OuterRef("pk")))).order_by(*_ordered(items, queue.order))


def queue_candidates(*, queue: Queue, reviewer, now: datetime, skipped: list[int] = ()) -> list[int]:
    """Item ids this reviewer could be handed next: open and not held by another reviewer's live lock."""
    held_by_others = ReviewLock.objects.filter(item=OuterRef("pk"), expires_at__gt=now).exclude(reviewer=reviewer)
    items = queue_open_items(queue=queue, reviewer=reviewer).exclude(Exists(held_by_others))
    if skipped:
        items = items.exclude(id__in=list(skipped))
    return list(items.values_list("id", flat=True)[:CANDIDATES_PER_TRY])


def queue_own_locked_item(*, queue: Queue, reviewer, now: datetime) -> int | None:
    """The item this reviewer already holds in this queue, if it still waits for them."""
    lock = ReviewLock.objects.filter(reviewer=reviewer, expires_at__gt=now).order_by("-expires_at").first()
    if lock is None:
        return None
    still_open = queue_open_items(queue=queue, reviewer=reviewer).filter(id=lock.item_id).exists()
    return lock.item_id if still_open else None


@dataclass(frozen=True)
class Progress:
    done: int
    total: int

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0


def _departed(*, queue_keys: set[str] | None = None) -> dict[str, set[int]]:
    """Per queue key: the items labelled in that queue (the audit trail says so) that are no longer in it.

    A label that gives an item another category moves it out of its queue;
    it was still work done there, so the queue's progress keeps counting it.
    One query, over the label events that name a queue.
    """
    events = AuditEvent.objects.filter(action="labelled", details__has_key="queue").order_by()
    if queue_keys is not None:
        # One queue's page reads only its own events, not every queue's.
        events = events.filter(details__queue__in=sorted(queue_keys))
    rows = events.values_list("details__queue", "item_id", "item__assignment__category_id").distinct()
    departed: dict[str, set[int]] = {}
    for key, item_id, category_id in rows:
        key = str(key)
        if item_id is None or (queue_keys is not None and key not in queue_keys):
            continue
        if key in (UNASSIGNED, DOUBLE):
            # The unassigned queue loses an item that got a category; double review never loses one.
            still_there = key == DOUBLE or category_id is None
        else:
            still_there = str(category_id) == key
        if not still_there:
            departed.setdefault(key, set()).add(item_id)
    return departed


def queue_progress(*, queue: Queue) -> Progress:
    """How much of the queue is reviewed: its items labelled (twice for double review), out of its items,
    each count including the items labelled here that the label moved to another category."""
    moved_out = len(_departed(queue_keys={queue.key}).get(queue.key, ()))
    return _fixed_progress(queue, moved_out)


@dataclass(frozen=True)
class QueueRow:
    queue: Queue
    progress: Progress


def queues_overview() -> list[QueueRow]:
    """Every queue a reviewer can pick, with its progress, in five queries."""
    labelled = Exists(Label.objects.filter(item=OuterRef("item")))
    per_category = (
        Assignment.objects.filter(category__status__in=Category.OPEN_STATUSES)
        .annotate(labelled=labelled)
        .values("category")
        .annotate(total=Count("id"), done=Count("id", filter=Q(labelled=True)))
        .values_list("category", "total", "done")
    )
    departed = _departed()
    moved = {key: len(ids) for key, ids in departed.items()}
    counts = {
        category_id: Progress(done=done + moved.get(str(category_id), 0), total=total + moved.get(str(category_id), 0))
        for category_id, total, done in per_category
    }
    fixed = [Queue(key=UNASSIGNED, title="Unassigned items"), Queue(key=DOUBLE, title="Double review")]
    rows = [QueueRow(queue=queue, progress=_fixed_progress(queue, moved.get(queue.key, 0))) for queue in fixed]
    for category in Category.objects.open().only("id", "name", "status", "size"):
        moved_out = moved.get(str(category.id), 0)
        rows.append(
            QueueRow(
                queue=Queue(key=str(category.id), title=category.name, category=category),
                progress=counts.get(category.id, Progress(moved_out, moved_out)),
            )
        )
    return rows


def _fixed_progress(queue: Queue, moved_out: int) -> Progress:
    """Progress from the queue's items as they are now, plus `moved_out` items labelled here that left it."""
    items = queue_items(queue=queue)
    if queue.key.startswith(FLAG_QUEUE_PREFIX):
        counts = items.annotate(open=_flag_exists(queue, pending_only=True)).aggregate(
            total=Count("id"), done=Count("id", filter=Q(open=False))
        )
        return Progress(done=counts["done"] or 0, total=counts["total"] or 0)
    if queue.key == DOUBLE:
        counts = items.annotate(label_count=Count("labels")).aggregate(
            total=Count("id"), done=Count("id", filter=Q(label_count__gte=2))
        )
    else:
        counts = items.annotate(labelled=Exists(Label.objects.filter(item=OuterRef("pk")))).aggregate(
            total=Count("id"), done=Count("id", filter=Q(labelled=True))
        )
    return Progress(done=(counts["done"] or 0) + moved_out, total=(counts["total"] or 0) + moved_out)


@dataclass(frozen=True)
class ReviewerCount:
    username: str
    today: int
    week: int


def reviewer_counts(*, now: datetime | None = None) -> list[ReviewerCount]:
    """Items each reviewer labelled today and this week (from Monday), local time; most this week first.

    A label counts on the day it was first given: editing it later is not new work. One query.
    """
    today = today_start(now)
    # Midnight of Monday made anew, not today minus days: a clock change in between would shift it by an hour.
    monday = day_start(today.date() - timedelta(days=today.weekday()))
    rows = (
        Label.objects.filter(created_at__gte=monday)
        .order_by()
        .values("reviewer__username")
        .annotate(week=Count("id"), today=Count("id", filter=Q(created_at__gte=today)))
        .values_list("reviewer__username", "today", "week")
    )
    counts = [ReviewerCount(username=username, today=n_today, week=n_week) for username, n_today, n_week in rows]
    return sorted(counts, key=lambda row: (-row.week, -row.today, row.username))


# --- Navigation ---------------------------------------------------------------------


def label_previous_item_id(*, reviewer, item_id: int) -> int | None:
    """The item this reviewer labelled before the given one (or last, if it has no label of theirs)."""
    labels = Label.objects.filter(reviewer=reviewer).exclude(item_id=item_id)
    current = Label.objects.filter(reviewer=reviewer, item_id=item_id).values_list("updated_at", "id").first()
    if current is not None:
        updated_at, label_id = current
        labels = labels.filter(Q(updated_at__lt=updated_at) | Q(updated_at=updated_at, id__lt=label_id))
    return labels.order_by("-updated_at", "-id").values_list("item_id", flat=True).first()


def item_neighbour_ids(*, item: FeedbackItem) -> tuple[int | None, int | None]:
    """(previous, next) item ids in the order of the item lists: newest first."""
    newer = Q(received_at__gt=item.received_at) | Q(received_at=item.received_at, id__gt=item.id)
    older = Q(received_at__lt=item.received_at) | Q(received_at=item.received_at, id__lt=item.id)
    previous = FeedbackItem.objects.filter(newer).order_by("received_at", "id").values_list("id", flat=True).first()
    following = FeedbackItem.objects.filter(older).order_by("-received_at", "-id").values_list("id", flat=True).first()
    return previous, following


# --- The item page ------------------------------------------------------------------


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
    return scrub(text[:1000], extra_patterns=custom_patterns.all_sources()).text if text else ""


# --- Rendering the rated context ----------------------------------------------------

FENCE = re.compile(r"```([\w.+#-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


@dataclass
class Segment:
    kind: str  # "text" or "code"
    text: str
    language: str = ""


@dataclass
class ToolCall:
    name: str
    arguments: str
    result: str
    has_result: bool
    # Where the call is in the context ("tool_calls.3", "messages.2.tool_calls.0"): flags point at it.
    location: str = ""


@dataclass
class Block:
    role: str
    segments: list[Segment] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)


def text_segments(text: Any) -> list[Segment]:
    """Split text at ``` fences into prose and code, so code keeps its lines and indentation."""
    if not isinstance(text, str):
        return [Segment(kind="code", text=_pretty(text), language="json")]
    segments: list[Segment] = []
    position = 0
    for match in FENCE.finditer(text):
        prose = text[position : match.start()].strip("\n")
        if prose.strip():
            segments.append(Segment(kind="text", text=prose))
        segments.append(Segment(kind="code", text=match.group(2).rstrip("\n"), language=match.group(1)))
        position = match.end()
    rest = text[position:].strip("\n")
    if rest.strip():
        segments.append(Segment(kind="text", text=rest))
    return segments


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def _tool_call(raw: Any, location: str = "") -> ToolCall:
    if not isinstance(raw, dict):
        return ToolCall(name="tool call", arguments=_pretty(raw), result="", has_result=False, location=location)
    # Products send both the flat shape and OpenAI's {"function": {...}} one.
    function = raw.get("function") if isinstance(raw.get("function"), dict) else {}
    name = raw.get("name") or function.get("name") or "tool call"
    arguments = raw.get("arguments", function.get("arguments", raw.get("input", {})))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    has_result = any(key in raw for key in ("result", "output"))
    result = raw.get("result", raw.get("output", ""))
    return ToolCall(
        name=str(name), arguments=_pretty(arguments), result=_pretty(result), has_result=has_result, location=location
    )


def item_transcript(*, item: FeedbackItem, context: dict | None = None) -> list[Block]:
    """The rated conversation or agent run as labelled blocks, in the order it happened.

    `context`: the (scrubbed) context to show instead of the item's own.
    """
    if context is None:
        context = item.context if isinstance(item.context, dict) else {}
    blocks: list[Block] = []
    for j, message in enumerate(context.get("messages") or []):
        if not isinstance(message, dict):
            continue
        block = Block(role=str(message.get("role", "message")), segments=text_segments(message.get("content", "")))
        block.tool_calls = [
            _tool_call(call, f"messages.{j}.tool_calls.{k}") for k, call in enumerate(message.get("tool_calls") or [])
        ]
        blocks.append(block)
    output = context.get("output")
    tool_calls = [_tool_call(call, f"tool_calls.{i}") for i, call in enumerate(context.get("tool_calls") or [])]
    if tool_calls:
        blocks.append(Block(role="tool calls", tool_calls=tool_calls))
    if output not in (None, ""):
        blocks.append(Block(role="output", segments=text_segments(output)))
    return blocks


def item_metadata(*, item: FeedbackItem, context: dict | None = None) -> str:
    if context is None:
        context = item.context if isinstance(item.context, dict) else {}
    metadata = context.get("metadata")
    return _pretty(metadata) if metadata else ""


@dataclass
class ItemText:
    """What the item page shows of an item's text: scrubbed by default, the original on reveal."""

    title: str
    comment: str
    expected: str
    transcript: str
    blocks: list[Block]
    metadata: str
    revealed: bool
    # Placeholder label -> replacements; empty when revealed or when nothing was found.
    scrubbed: dict[str, int] = field(default_factory=dict)

    @property
    def scrubbed_total(self) -> int:
        return sum(self.scrubbed.values())


def item_text(*, item: FeedbackItem, reveal: bool = False) -> ItemText:
    """The item's texts for its page: secrets and personal data replaced by placeholders unless `reveal`."""
    context = item.context if isinstance(item.context, dict) else {}
    fields = {"title": item.title or "", "comment": item.comment or "", "expected": item.expected or ""}
    counts: dict[str, int] = {}
    if not reveal:
        extra = custom_patterns.all_sources()
        context, context_counts = scrub_json(context, extra_patterns=extra)
        totals = Counter(context_counts)
        for name, value in fields.items():
            result = scrub(value, extra_patterns=extra)
            fields[name] = result.text
            totals.update(result.counts)
        counts = dict(sorted(totals.items()))
    transcript = context.get("transcript", "")
    return ItemText(
        **fields,
        transcript=transcript if isinstance(transcript, str) else "",
        blocks=item_transcript(item=item, context=context),
        metadata=item_metadata(item=item, context=context),
        revealed=reveal,
        scrubbed=counts,
    )


def item_raw_payload(*, item: FeedbackItem) -> str:
    return _pretty(item.raw_payload)


# --- Agreement ----------------------------------------------------------------------


@dataclass
class Pair:
    item: FeedbackItem
    first: Label
    second: Label
    category: Category | None

    @property
    def preview(self) -> str:
        """The item's title or comment, scrubbed: the agreement page is read widely."""
        return item_snippet(self.item)

    @property
    def verdicts_agree(self) -> bool:
        return self.first.verdict == self.second.verdict

    @property
    def categories_agree(self) -> bool:
        both_failures = self.first.verdict == self.second.verdict == Label.Verdict.FAILURE
        return not both_failures or self.first.category_id == self.second.category_id

    @property
    def agrees(self) -> bool:
        return self.verdicts_agree and self.categories_agree


@dataclass
class CategoryAgreement:
    category: Category | None
    items: int
    agreed: int
    kappa: float | None

    @property
    def agreed_percent(self) -> int:
        return round(100 * self.agreed / self.items) if self.items else 0


@dataclass
class Agreement:
    rows: list[CategoryAgreement]
    overall: CategoryAgreement
    disagreements: list[Pair]
    requested: int
    waiting: int


def verdict_kappa(first: list[str], second: list[str]) -> float | None:
    """Cohen's kappa of two reviewers' verdicts; None where it is undefined.

    Kappa is undefined when both reviewers used one and the same verdict for
    every item (chance agreement is then 1): the page shows the plain
    agreement instead of a number that means nothing.
    """
    if not first or len(set(first) | set(second)) < 2:
        return None
    return float(cohen_kappa_score(first, second, labels=Label.Verdict.values))


def _agreement_of(category: Category | None, pairs: list[Pair]) -> CategoryAgreement:
    return CategoryAgreement(
        category=category,
        items=len(pairs),
        agreed=sum(pair.verdicts_agree for pair in pairs),
        kappa=verdict_kappa([p.first.verdict for p in pairs], [p.second.verdict for p in pairs]),
    )


def agreement_summary() -> Agreement:
    """Per category: Cohen's kappa between the first two reviews of each double-reviewed item.

    An item's category is its first label's, else its assignment's. Two
    queries however many items were sampled.
    """
    labels = (
        Label.objects.filter(item__double_review__isnull=False)
        .select_related("reviewer", "category", "item__assignment__category")
        .defer("item__raw_payload", "item__context", "item__embed_text")
        .order_by("item_id", "created_at", "id")
    )
    by_item: dict[int, list[Label]] = {}
    for label in labels:
        by_item.setdefault(label.item_id, []).append(label)
    pairs: list[Pair] = []
    for item_labels_ in by_item.values():
        if len(item_labels_) < 2:
            continue
        first, second = item_labels_[:2]
        item = first.item
        category = first.category
        if category is None and item_assignment(item) is not None:
            category = item.assignment.category
        pairs.append(Pair(item=item, first=first, second=second, category=category))
    grouped: dict[int | None, list[Pair]] = {}
    for pair in pairs:
        grouped.setdefault(pair.category.id if pair.category else None, []).append(pair)
    rows = [_agreement_of(group[0].category, group) for group in grouped.values()]
    rows.sort(key=lambda row: (-row.items, row.category.name if row.category else ""))
    requested = DoubleReview.objects.count()
    return Agreement(
        rows=rows,
        overall=_agreement_of(None, pairs),
        disagreements=[pair for pair in pairs if not pair.agrees],
        requested=requested,
        waiting=requested - len(pairs),
    )


# --- Disputes: which label is the truth --------------------------------------------

SETTLED_SHOWN = 50


def labels_disagree(labels: Sequence[Label]) -> bool:
    """Do an item's labels give different verdicts, or put one failure in different categories?"""
    verdicts = {label.verdict for label in labels}
    if len(verdicts) > 1:
        return True
    return verdicts == {Label.Verdict.FAILURE} and len({label.category_id for label in labels}) > 1


def labels_fingerprint(labels: Sequence[Label]) -> dict[str, str]:
    """Each label's id and last change: what a settlement was made against."""
    return {str(label.id): label.updated_at.isoformat() for label in labels}


def settlement_holds(settlement: Settlement | None, labels: Sequence[Label]) -> bool:
    """Is the settlement still about these labels? A label changed or added since reopens the dispute."""
    return settlement is not None and settlement.labels_seen == labels_fingerprint(labels)


def settled_label(settlement: Settlement) -> Label:
    """The settlement in the shape of a label (unsaved), for readers such as the exports that take one."""
    return Label(
        id=settlement.label_id,
        item_id=settlement.item_id,
        verdict=settlement.verdict,
        category=settlement.category,
        severity=settlement.severity,
        tags=list(settlement.tags),
        hint=settlement.hint,
        corrected_response=settlement.corrected_response,
        split=settlement.split,
        updated_at=settlement.settled_at,
    )


def may_settle(user, labels: Sequence[Label]) -> bool:
    """Admins settle any dispute; a reviewer only one they gave no label in, so nobody judges their own."""
    return is_admin(user) or all(label.reviewer_id != user.id for label in labels)


@dataclass
class Dispute:
    item: FeedbackItem
    # Oldest first, so "first review" reads as it happened.
    labels: list[Label]
    # The latest settlement, standing or reopened by a label changed since.
    settlement: Settlement | None

    @property
    def settled(self) -> bool:
        return settlement_holds(self.settlement, self.labels)

    @property
    def reopened(self) -> bool:
        return self.settlement is not None and not self.settled

    @property
    def preview(self) -> str:
        return item_snippet(self.item)


@dataclass
class Disputes:
    open: list[Dispute]
    # The most recently settled, newest first (at most SETTLED_SHOWN).
    settled: list[Dispute]
    settled_total: int


def disputes_list() -> Disputes:
    """Every item whose labels disagree, open ones first; three queries however many there are."""
    several = Label.objects.order_by().values("item_id").annotate(n=Count("id")).filter(n__gte=2).values("item_id")
    labels = (
        Label.objects.filter(item_id__in=several)
        .select_related("reviewer", "category", "item")
        .defer("item__raw_payload", "item__context", "item__embed_text")
        .order_by("item_id", "created_at", "id")
    )
    by_item: dict[int, list[Label]] = {}
    for label in labels:
        by_item.setdefault(label.item_id, []).append(label)
    contested = {item_id: group for item_id, group in by_item.items() if labels_disagree(group)}
    settlements = {
        settlement.item_id: settlement
        for settlement in Settlement.objects.filter(item_id__in=list(contested)).select_related("settled_by", "category")
    }
    disputes = [
        Dispute(item=group[0].item, labels=group, settlement=settlements.get(item_id))
        for item_id, group in contested.items()
    ]
    settled = sorted((d for d in disputes if d.settled), key=lambda d: d.settlement.settled_at, reverse=True)
    return Disputes(
        open=[dispute for dispute in disputes if not dispute.settled],
        settled=settled[:SETTLED_SHOWN],
        settled_total=len(settled),
    )
