"""Thin Celery tasks for rollout checks."""

from celery import shared_task

from rollouts import services


@shared_task(name="rollouts.tasks.check_items", queue="default", acks_late=True)
def check_items(item_ids: list[int]) -> int:
    """Run the rollout checks over a batch of items (queued by the embedding task beside scrubbing).

    Steps: rollouts.services.items_check. Idempotent: items already checked under the current checks are skipped.
    """
    return services.items_check(item_ids=item_ids).checked
