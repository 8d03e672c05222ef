"""Factories for the rollout tests: rated runs with tool calls, and versions with a planted rise in one check."""

import uuid
from datetime import date, timedelta

from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.compare.params import compare_params_parse
from rollouts import services
from tests.factories import source_make


def rollout_make(source, calls, *, version="2.1", variant="A", rating=-1, output="Done, all tests pass.", **fields):
    context = {"messages": [{"role": "user", "content": "Fix the failing test"}], "output": output, "tool_calls": calls}
    return FeedbackItem.objects.create(
        source=source,
        external_id=f"evt_{uuid.uuid4().hex[:12]}",
        kind=FeedbackItem.Kind.RATING,
        rating=rating,
        context=context,
        raw_payload={"id": "x", "context": context},
        model_name="coder",
        model_version=version,
        variant=variant,
        occurred_at=fields.pop("occurred_at", timezone.now()),
        receipt_id=uuid.uuid4(),
        **({"status": FeedbackItem.Status.EMBEDDED} | fields),
    )


GIT_LOG = {"name": "shell", "arguments": {"command": "git log -p -- src/parse.py"}, "result": "commit abc"}


READ_TEST = {"name": "read_file", "arguments": {"path": "tests/test_parse.py"}, "result": "40 lines"}


CLEAN = [{"name": "shell", "arguments": {"command": "git status"}}, {"name": "read_file", "arguments": {"path": "tests/test_a.py"}}]


HISTORY = [{"name": "shell", "arguments": {"command": "git log -p src/a.py"}}]


def plant(source, *, version: str, total: int, flagged: int, day: date) -> None:
    when = timezone.make_aware(timezone.datetime.combine(day, timezone.datetime.min.time())) + timedelta(hours=12)
    items = []
    for n in range(total):
        context = {"messages": [{"role": "user", "content": "fix"}], "output": "done",
                   "tool_calls": (HISTORY if n < flagged else []) + CLEAN}
        items.append(
            FeedbackItem(
                source=source, external_id=f"{version}-{n}-{uuid.uuid4().hex[:6]}", kind="rating", rating=1,
                context=context, raw_payload={"context": context}, model_version=version, variant="A",
                occurred_at=when, receipt_id=uuid.uuid4(), status="embedded",
            )
        )
    FeedbackItem.objects.bulk_create(items, batch_size=500)


def planted_rise():
    """2.1 and 2.2 rollouts two days ago, 1,000 each, 3 and 41 of them reading the VCS history; returns the day."""
    source = source_make("agent-backend")[0]
    day = timezone.localdate() - timedelta(days=2)
    plant(source, version="2.1", total=1000, flagged=3, day=day)
    plant(source, version="2.2", total=1000, flagged=41, day=day)
    # A report with no tool calls is not a rollout: it counts on neither side.
    FeedbackItem.objects.create(source=source, external_id="r1", kind="report", model_version="2.2",
                                occurred_at=timezone.now(), receipt_id=uuid.uuid4(), context={})
    services.items_check(item_ids=list(FeedbackItem.objects.values_list("id", flat=True)))
    return day


def params_for(day):
    return compare_params_parse(a="2.1", b="2.2", date_from=day.isoformat(), date_to=day.isoformat())
