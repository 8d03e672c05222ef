import time

from django.core.management.base import BaseCommand, CommandError

from labeling.clustering.runs import (
    RunAlreadyActive,
    cluster_run_execute,
    cluster_run_start,
)
from labeling.models import Category, ClusterRun


class Command(BaseCommand):
    help = "Run clustering over every failure signal and print a summary."

    def add_arguments(self, parser):
        parser.add_argument(
            "--queue", action="store_true", help="hand the run to the Celery workers and wait for it (default: run here)"
        )

    def handle(self, *args, queue, **options):
        try:
            run = cluster_run_start(trigger=ClusterRun.Trigger.COMMAND, enqueue=queue)
        except RunAlreadyActive as exc:
            raise CommandError(f"{exc}; try again when it has finished") from None
        if queue:
            while run.status in (ClusterRun.Status.QUEUED, ClusterRun.Status.RUNNING):
                time.sleep(1)
                run.refresh_from_db()
                self.stdout.write(f"  {run.stage or run.status} {run.progress:.0%}")
        else:
            try:
                cluster_run_execute(run_id=run.id)
            except Exception as exc:
                raise CommandError(f"cluster run {run.id} failed: {exc}") from None
            run.refresh_from_db()
        if run.status != ClusterRun.Status.DONE:
            raise CommandError(f"cluster run {run.id} {run.status}: {run.error}")
        counts = run.counts
        self.stdout.write(
            f"run {run.id}: {counts['items']} items, {counts['clusters']} clusters "
            f"({counts['matched']} matched, {counts['new']} new), {counts['unassigned']} unassigned"
        )
        for category in Category.objects.open().filter(size__gt=0)[:30]:
            self.stdout.write(f"  {category.size:6d}  [{category.status}] {category.name}")
