"""Review queues: which items wait in each (unassigned, a category, double review, a rollout check), in
which order, who holds which, and how far each queue has come."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import (
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

from core.dates import day_start, today_start
from core.ids import id_parse
from feedback.models import FeedbackItem
from labeling.clustering.services import failure_signals
from labeling.flags import item_flags
from labeling.models import (
    Assignment,
    AuditEvent,
    Category,
    Label,
    ReviewLock,
)

# How many unlocked candidates one request tries before it gives up: enough
# to get past the items other reviewers are locking at the same moment.
CANDIDATES_PER_TRY = 25
UNASSIGNED = "unassigned"
DOUBLE = "double"

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
    title = item_flags().title(key.removeprefix(FLAG_QUEUE_PREFIX))
    return Queue(key=key, title=f"Flagged: {title}", order=order) if title else None


def _flag_exists(queue: Queue, *, pending_only: bool) -> Exists:
    return item_flags().flagged(name=queue.key.removeprefix(FLAG_QUEUE_PREFIX), pending_only=pending_only)


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
    # Grouped by area (those without one last), the largest categories first within each.
    categories = (
        Category.objects.open()
        .select_related("area")
        .only("id", "name", "status", "size", "area__id", "area__name")
        .order_by(F("area__name").asc(nulls_last=True), "area_id", "-size", "id")
    )
    for category in categories:
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
