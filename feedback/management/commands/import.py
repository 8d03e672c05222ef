"""manage.py import FILE --source NAME: store a file of past signals, as the upload page does."""

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from feedback.imports import services as import_services
from feedback.imports.readers import FORMATS
from feedback.models import ImportRun

REFUSALS_SHOWN = 50


class Command(BaseCommand):
    help = (
        "Import past signals from a JSONL, CSV or parquet file of events (the webhook body, or this app's own "
        "items.csv / items.parquet export), or a Langfuse or LangSmith export (JSONL). Re-importing stores "
        "nothing twice."
    )

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--source", required=True, help="the source the items belong to (made if it does not exist)")
        parser.add_argument("--format", choices=FORMATS, help="default: from the file's extension")
        parser.add_argument(
            "--name",
            action="append",
            dest="names",
            default=[],
            help="Langfuse score name / LangSmith feedback key to take (repeatable; default: every one)",
        )
        parser.add_argument("--refused-out", help="write every refused line to this file as JSONL")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args, file, source, format, names, refused_out, no_progress, **options):
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"no such file: {file}")
        try:
            source_row, created = import_services.import_source_get_or_create(name=source)
            run = import_services.import_run_create(
                source=source_row,
                path=path.resolve(),
                file_name=path.name,
                file_format=format,
                names=names,
                made_by="manage.py import",
            )
        except ValueError as exc:  # FormatError is a ValueError too
            raise CommandError(str(exc)) from None
        if created:
            self.stdout.write(f"made source {source_row.name!r} (slug {source_row.slug}, kind import)")
        self.stdout.write(f"import run #{run.id}: {path.name} as {run.format} into {source_row.name}")

        bar = None
        if not no_progress:
            bar = tqdm(
                total=run.progress_total,
                unit="B" if run.format != "parquet" else " rows",
                unit_scale=True,
                file=sys.stderr,
                desc="importing",
            )
        shown = {"done": 0}

        def progress(current: ImportRun) -> None:
            if bar is not None:
                bar.update(current.progress_done - shown["done"])
                bar.set_postfix(stored=current.stored, duplicates=current.duplicates, refused=current.refused)
                shown["done"] = current.progress_done

        refused_file = open(refused_out, "w", encoding="utf-8") if refused_out else None  # noqa: SIM115
        try:
            on_refusal = None
            if refused_file is not None:

                def on_refusal(refusal):
                    refused_file.write(json.dumps(refusal, ensure_ascii=False) + "\n")

            import_services.import_run_step(run_id=run.id, on_progress=progress, on_refusal=on_refusal)
        finally:
            if bar is not None:
                bar.close()
            if refused_file is not None:
                refused_file.close()
        run.refresh_from_db()
        self._report(run, refused_out)
        if run.status == ImportRun.Status.FAILED:
            raise CommandError(f"the import failed: {run.error}")

    def _report(self, run: ImportRun, refused_out: str | None) -> None:
        self.stdout.write(
            f"stored {run.stored}, duplicates {run.duplicates}, refused {run.refused}"
            + (f", skipped {run.skipped} (other names)" if run.skipped else "")
            + f" ({run.records_done} records read)"
        )
        for refusal in run.refusals[:REFUSALS_SHOWN]:
            where = f"line {refusal['line']}"
            if refusal.get("id"):
                where += f" (id {refusal['id']})"
            field = f" [{refusal['field']}]" if refusal.get("field") else ""
            self.stdout.write(f"  refused {where}{field}: {refusal['reason']}")
        if run.refused > REFUSALS_SHOWN:
            more = f"; all of them are in {refused_out}" if refused_out else "; --refused-out FILE writes all of them"
            self.stdout.write(f"  ... and {run.refused - REFUSALS_SHOWN} more{more}")
