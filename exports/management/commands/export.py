"""python manage.py export DATASET: make the next version now and print its folder (the last line).

When nothing changed since the latest version no version is made (unless
--force) and the last line is the latest version's folder.
"""

import time

from django.core.management.base import BaseCommand, CommandError

from exports import runs, writing
from exports.models import Dataset, ExportRun, Mode, Trigger


class Command(BaseCommand):
    help = "Export the next version of a dataset; the last line printed is the version's folder."

    def add_arguments(self, parser):
        parser.add_argument("dataset", help="the dataset's name")
        parser.add_argument(
            "--incremental", action="store_true", help="only items that are in no earlier version of this dataset"
        )
        parser.add_argument(
            "--force", action="store_true", help="make a version even when nothing changed since the latest one"
        )
        parser.add_argument(
            "--verify",
            type=int,
            metavar="N",
            help="write version N again from its recorded items and compare checksums (restores a missing folder)",
        )

    def handle(self, *args, dataset, incremental, force, verify, **options):
        found = Dataset.objects.filter(name=dataset).first()
        if found is None:
            names = ", ".join(Dataset.objects.values_list("name", flat=True)) or "none defined yet"
            raise CommandError(f"no dataset named '{dataset}' (datasets: {names})")
        if verify is not None:
            return self.verify(found, verify)
        started = time.monotonic()
        try:
            run = runs.export_run_start(
                dataset=found,
                trigger=Trigger.COMMAND,
                made_by="command",
                mode=Mode.INCREMENTAL if incremental else Mode.SNAPSHOT,
                force=force,
                enqueue=False,
            )
        except runs.ExportAlreadyRunning as running:
            raise CommandError(str(running)) from None
        try:
            version = runs.export_run_execute(run_id=run.id)
        except Exception as exc:
            raise CommandError(f"export failed: {type(exc).__name__}: {exc}") from exc
        if version is None:
            raise CommandError(f"run {run.id} was taken by another worker")
        run.refresh_from_db()
        if run.status == ExportRun.Status.UNCHANGED:
            self.stdout.write(
                f"{found.name}: unchanged since v{version.number}, no version made (--force makes one) "
                f"| {time.monotonic() - started:.1f}s"
            )
            self.stdout.write(str(writing.version_folder(version=version)))
            return
        held = version.held_out.get("total", 0)
        self.stdout.write(
            f"{found.name} v{version.number}: {version.item_count} items, {held} held out, "
            f"{len(version.files) + 1} files | {time.monotonic() - started:.1f}s"
        )
        self.stdout.write(str(writing.version_folder(version=version)))

    def verify(self, dataset: Dataset, number: int) -> None:
        version = dataset.versions.filter(number=number).first()
        if version is None:
            raise CommandError(f"{dataset.name} has no version {number}")
        check = writing.dataset_version_verify(version=version)
        folder = writing.version_folder(version=version)
        if not check.identical:
            raise CommandError(f"{dataset.name} v{number} differs when written again: {', '.join(check.differing)}")
        self.stdout.write(
            f"{dataset.name} v{number}: byte-identical when written again"
            + (" (folder restored)" if check.restored else "")
        )
        self.stdout.write(str(folder))
