"""Thin Celery tasks for the exports: take ids, call one service."""

import logging

from celery import shared_task

from exports import runs
from exports.models import Dataset, Trigger

logger = logging.getLogger(__name__)


@shared_task(name="exports.tasks.export_run", queue="default")
def export_run(run_id: int) -> int | None:
    """Execute one queued export run (steps: exports.runs.export_run_execute); returns the version id."""
    version = runs.export_run_execute(run_id=run_id)
    return version.id if version else None


@shared_task(name="exports.tasks.scheduled_export", queue="default")
def scheduled_export(dataset_id: int) -> int | None:
    """The dataset's schedule fired: export here, full or incremental as the schedule says.

    Skipped quietly when the dataset is gone or its previous run is still going.
    """
    dataset = Dataset.objects.filter(id=dataset_id).first()
    if dataset is None:
        return None
    try:
        run = runs.export_run_start(
            dataset=dataset,
            trigger=Trigger.SCHEDULE,
            made_by=f"schedule '{dataset.schedule_cron}'" if dataset.schedule_cron else "schedule",
            mode=dataset.schedule_mode,
            enqueue=False,
        )
    except runs.ExportAlreadyRunning as running:
        logger.info("scheduled export of %s skipped: %s", dataset.name, running)
        return None
    version = runs.export_run_execute(run_id=run.id)
    return version.id if version else None
