"""Thin Celery tasks for the feedback pipeline: take ids, call one service."""

import logging

from celery import current_app, shared_task
from django.conf import settings

from feedback import pipeline
from feedback.imports import services as import_services

logger = logging.getLogger(__name__)

# Assignment to categories lives in the labeling app, which builds on this one;
# feedback names the task instead of importing it so data flows one way.
ASSIGN_TASK = "labeling.tasks.assign_items"
# The rollout checks read the same batch's tool calls, beside scrubbing and embedding (rollouts app).
CHECK_TASK = "rollouts.tasks.check_items"
# A single failing item waits this long before its first retry, doubling after each.
RETRY_FIRST_SECONDS = 5


@shared_task(name="feedback.tasks.embed_waiting", queue="embed")
def embed_waiting(gather: bool = True) -> int:
    """Embed a batch of whatever items wait, then hand them to assignment (queue ``embed``).

    What a single event's commit queues (feedback.pipeline). Steps:
    with `gather`, wait ``PIPELINE_GATHER_SECONDS`` for more events to join;
    clear the wake-up mark, so that commits from now on queue a new one;
    claim up to ``PIPELINE_BATCH_SIZE`` waiting items, oldest first, that no
    other worker holds (a full batch wakes a peer first); embed them and mark
    them embedded; queue assignment and the rollout checks for the batch.
    Redelivered, or run beside another, it takes only items still waiting,
    so nothing is embedded twice. A failing batch is embedded one item at a
    time; an item that fails goes to `embed_items`' retries.
    """
    pipeline.items_wake_clear(gather_seconds=settings.PIPELINE_GATHER_SECONDS if gather else 0.0)
    batch = pipeline.items_embed_waiting(limit=settings.PIPELINE_BATCH_SIZE)
    _hand_on(embedded_ids=batch.embedded_ids, item_ids=batch.claimed_ids)
    return len(batch.embedded_ids)


@shared_task(name="feedback.tasks.embed_items", queue="embed", bind=True, max_retries=3)
def embed_items(self, item_ids: list[int]) -> int:
    """Embed these items, then hand them to assignment.

    Queued for batches (webhook batches, imports), by the sweeper and for
    retries. Steps: embed (idempotent: only items still ``received`` that no
    other worker holds are touched); queue assignment for those that got a
    vector. On an error a batch is split into single items so one bad item
    cannot hold back the others; a single item is retried with backoff and
    ends ``failed`` once out of attempts.
    """
    try:
        embedded_ids = pipeline.items_embed(item_ids=item_ids)
    except Exception as exc:
        if len(item_ids) > 1:
            logger.warning("embedding a batch of %d failed; retrying one by one", len(item_ids), exc_info=True)
            pipeline.items_enqueue(item_ids=item_ids, batch_size=1)
            return 0
        pipeline.items_record_failure(item_ids=item_ids, error=f"{type(exc).__name__}: {exc}")
        raise self.retry(exc=exc, countdown=RETRY_FIRST_SECONDS * 2**self.request.retries) from exc
    _hand_on(embedded_ids=embedded_ids, item_ids=item_ids)
    return len(embedded_ids)


def _hand_on(*, embedded_ids: list[int], item_ids: list[int]) -> None:
    """Queue assignment for the items that got a vector, and the rollout checks for the whole batch."""
    if embedded_ids:
        assign_task = current_app.tasks.get(ASSIGN_TASK)
        if assign_task is not None:
            assign_task.delay(embedded_ids)
    check_task = current_app.tasks.get(CHECK_TASK)
    if check_task is not None and item_ids:
        check_task.delay(item_ids)  # the whole batch: an item with no words can still have tool calls


@shared_task(name="feedback.tasks.sweep_unprocessed", queue="default")
def sweep_unprocessed() -> int:
    """Queue every item left waiting past the grace period (broker outages, lost tasks)."""
    return pipeline.items_sweep_unprocessed()


@shared_task(name="feedback.tasks.reembed_items", queue="embed")
def reembed_items() -> int:
    """Re-embed one batch of items embedded under an older text recipe (queue ``embed``)."""
    return pipeline.items_reembed(limit=2000)


# A step reads for about a minute, far inside the task time limits; the next
# step is queued as a new task, so a long file never holds one worker slot for hours.
IMPORT_STEP_SECONDS = 60


@shared_task(name="feedback.tasks.import_file", queue="default")
def import_file(run_id: int) -> int:
    """One step of an import run.

    Steps: claim the run (stop quietly if another step holds it or it
    ended); read on from its checkpoint for up to a minute, storing batches;
    queue the next step if the file is not finished.
    """
    report = import_services.import_run_step(run_id=run_id, budget_seconds=IMPORT_STEP_SECONDS)
    if report.more:
        import_file.apply_async(args=[run_id])
    return report.stored
