"""Thin Celery tasks for the labeling app."""

from celery import shared_task

from labeling import counts
from labeling.clustering.runs import (
    RunAlreadyActive,
    cluster_run_execute,
    cluster_run_start,
)
from labeling.clustering.services import items_assign
from labeling.models import ClusterRun


@shared_task(name="labeling.tasks.assign_items", queue="default")
def assign_items(item_ids: list[int]) -> int:
    """Sort newly embedded items into the nearest category (or leave them for the next run)."""
    return items_assign(item_ids=item_ids)


@shared_task(name="labeling.tasks.run_clustering", queue="default")
def run_clustering(run_id: int) -> None:
    """Execute one queued cluster run (steps: labeling.clustering.runs.cluster_run_execute)."""
    cluster_run_execute(run_id=run_id)


@shared_task(name="labeling.tasks.scheduled_clustering", queue="default")
def scheduled_clustering() -> int | None:
    """The nightly run; skipped quietly while another run is going."""
    try:
        return cluster_run_start(trigger=ClusterRun.Trigger.SCHEDULE).id
    except RunAlreadyActive:
        return None


@shared_task(name="labeling.tasks.compact_counts", queue="default")
def compact_counts() -> int:
    """Fold the count changes the triggers appended into the daily counts (labeling.counts)."""
    return counts.counts_compact()
