"""What every background job shares: the columns of a run's life, and handing work to the broker.

A run is queued, then running (beating its heartbeat_at while it works),
then finished or failed with a reason a person reads. The request that
started it has committed by the time a task is sent, so a broker that cannot
be reached never fails that request: `send` reports it and the caller says
what happens instead (a sweeper retries, or the run fails with the reason).
"""

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import models
from django.utils import timezone

logger = logging.getLogger(__name__)


class JobRun(models.Model):
    """The life of one background job. Subclasses add `status` (with "queued" and "failed")
    and `active` (True while queued or running, NULL after)."""

    stage = models.CharField(max_length=100, blank=True, default="")
    progress = models.FloatField(default=0.0)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    def update(self, **fields) -> None:
        """Save these fields and beat the heartbeat, so a watcher knows the worker is alive."""
        fields["heartbeat_at"] = timezone.now()
        for name, value in fields.items():
            setattr(self, name, value)
        self.save(update_fields=list(fields))

    def stuck_reason(self, *, now: datetime, stuck_seconds: int) -> str:
        """Why this active run will never finish by itself, or '' while it may."""
        stale = now - timedelta(seconds=stuck_seconds)
        if self.status == "running" and self.heartbeat_at is not None and self.heartbeat_at < stale:
            return "stopped: no progress from its worker"
        if self.status == "queued" and self.created_at < stale:
            return "stopped: no worker picked it up"
        return ""

    @classmethod
    def reset_stuck(cls, runs: models.QuerySet, *, now: datetime, stuck_seconds: int, reason_of=None) -> int:
        """Fail the active runs among `runs` that will never finish, so the next run can start; how many.

        `reason_of(run)` may say more than `stuck_reason` knows (a process
        seen gone). A run is failed only if nobody touched it since it was read.
        """
        if reason_of is None:
            reason_of = lambda run: run.stuck_reason(now=now, stuck_seconds=stuck_seconds)  # noqa: E731
        reset = 0
        for run in runs.filter(active=True):
            reason = reason_of(run)
            if reason:
                reset += cls.objects.filter(id=run.id, active=True, heartbeat_at=run.heartbeat_at).update(
                    status="failed", active=None, error=reason, finished_at=now
                )
        return reset

    @classmethod
    def enqueue(cls, task, *, run_id: int, then: str) -> bool:
        """Hand the run to `task`; when the broker is unreachable the run fails at once, saying so and `then`.

        Failing it frees the one active slot its kind allows, so the next start is not blocked.
        """
        exc = send(task, [run_id], if_unreachable=f"{cls._meta.verbose_name} {run_id} fails")
        if exc is None:
            return True
        cls.objects.filter(id=run_id, status="queued").update(
            status="failed",
            active=None,
            finished_at=timezone.now(),
            error=f"the task queue is unreachable ({type(exc).__name__}); {then}",
        )
        return False


def send(task, args: Sequence = (), *, if_unreachable: str, **options) -> Exception | None:
    """Hand `task` to the broker once, without retrying; the error if the broker is unreachable.

    `if_unreachable` says in the log what happens instead ("3 items wait for the sweeper").
    """
    try:
        task.apply_async(args=list(args), retry=False, **options)
    except Exception as exc:  # any broker or transport failure
        logger.warning("broker unavailable; %s", if_unreachable, exc_info=True)
        return exc
    return None
