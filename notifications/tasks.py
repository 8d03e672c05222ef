"""Thin Celery tasks for notifications: take ids, call one service."""

from celery import shared_task

from notifications import events, services


@shared_task(name="notifications.tasks.deliver", queue="default", bind=True, max_retries=None)
def deliver(self, delivery_id: int) -> str:
    """Send one delivery (steps: notifications.services.delivery_attempt).

    A failed attempt is retried with exponential backoff through Celery's
    retry; how many attempts are made is counted on the row
    (NOTIFY_MAX_ATTEMPTS), so a redelivered message cannot add more.
    """
    attempt = services.delivery_attempt(delivery_id=delivery_id)
    if attempt.retry_in is not None:
        raise self.retry(countdown=attempt.retry_in)
    return attempt.status


@shared_task(name="notifications.tasks.sweep_deliveries", queue="default")
def sweep_deliveries() -> int:
    """Queue deliveries no task will attempt (broker down when they were queued, a worker lost)."""
    return services.deliveries_sweep()


@shared_task(name="notifications.tasks.check_regressions", queue="default")
def check_regressions() -> int:
    """Recompute the pinned comparisons and announce new regressions (steps: events.regressions_check)."""
    return events.regressions_check()


@shared_task(name="notifications.tasks.check_pipeline_failures", queue="default")
def check_pipeline_failures() -> int:
    """Announce the items that failed in the pipeline since the last check."""
    return 1 if events.pipeline_failures_check() else 0
