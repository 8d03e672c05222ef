"""Writes for imports of past signals: runs, their steps, and storing what a file holds.

Every record meets the checks a webhook event meets (feedback.schemas: the
storability screen, then strict validation naming the first bad field) and
the same identity rule: (source, external_id), stored with INSERT .. ON
CONFLICT DO NOTHING by services.items_insert_new, which also queues the new
items for the pipeline (scrub, embed, assign) after commit, in batches. So a
re-import stores nothing twice, and a bad line is refused with its line
number while the lines around it are stored.
"""

import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import ValidationError

from core import jobs
from core.storable import first_error, unstorable_error
from feedback import services
from feedback.imports.mapping import map_record, refusal
from feedback.imports.readers import (
    Candidate,
    FormatError,
    Reader,
    format_for,
    reader_for,
)
from feedback.models import FeedbackItem, ImportRun, Source
from feedback.schemas import RatingEvent, ReportIn

logger = logging.getLogger(__name__)

# Records validated and inserted together: one INSERT per batch, the size the
# webhook batches have, so a step's memory does not grow with the file.
BATCH_RECORDS = 1000
# How long a step may hold a run before another may take it up (its worker is presumed gone).
CLAIM_SECONDS = 300
# A run nobody has touched for this long is queued again by import_run_nudge.
STUCK_SECONDS = 120


def import_dir() -> Path:
    """Where uploaded files wait to be read: under DATA_DIR, which every worker of an install shares."""
    folder = Path(settings.DATA_DIR) / "imports"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def import_source_get_or_create(*, name: str) -> tuple[Source, bool]:
    """The source an import files its items under, by name or slug; a new one (kind "import") if none."""
    name = name.strip()
    if not name:
        raise ValueError("name the source the items belong to")
    source = Source.objects.filter(Q(name=name) | Q(slug=name)).first()
    if source is not None:
        if not source.is_active:
            raise ValueError(f"the source {source.name!r} is deactivated; activate it in the admin first")
        return source, False
    source, _ = services.source_create(name=name, kind=Source.Kind.IMPORT)
    return source, True


def import_run_create(
    *,
    source: Source,
    path: Path,
    file_name: str,
    file_format: str,
    names: list[str] | None = None,
    made_by: str = "",
    requested_by=None,
    owns_file: bool = False,
) -> ImportRun:
    """A queued run for a file already on disk. `owns_file`: remove the file when the run ends (uploads).

    The format is checked here, and a parquet file opened, so a file that
    cannot be read at all is refused before anything is queued.
    """
    file_format = format_for(file_name, file_format or None)
    reader = reader_for(path, file_format)
    return ImportRun.objects.create(
        source=source,
        file_name=file_name[:255],
        path=str(path),
        format=file_format,
        made_by=made_by[:200],
        requested_by=requested_by,
        progress_total=reader.total,
        options={"names": sorted(set(names or ())), "owns_file": owns_file},
    )


def import_upload_store(*, uploaded, file_name: str) -> Path:
    """Move an uploaded file to the import folder under a fresh name (the given name is never a path)."""
    suffix = Path(file_name).suffix.lower()[:10]
    target = import_dir() / f"{uuid.uuid4().hex}{suffix if suffix.isascii() else ''}"
    temporary = getattr(uploaded, "temporary_file_path", None)
    if temporary is not None:
        shutil.move(temporary(), target)
    else:
        with open(target, "wb") as handle:
            for chunk in uploaded.chunks():
                handle.write(chunk)
    return target


class ImportRefused(Exception):
    """An upload that cannot become a run: `message` says why, `field` names the form field at fault."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.message, self.field = message, field


def import_run_from_upload(
    *, uploaded, source_name: str, file_format: str, names: list[str], user
) -> tuple[ImportRun, bool]:
    """Store an uploaded file and queue its run after commit; (run, whether the source was made for it).

    The file is kept only when a run will read it: refused, it is removed at once.
    """
    try:
        source, created = import_source_get_or_create(name=source_name)
    except ValueError as exc:
        raise ImportRefused(str(exc), "source") from None
    stored = import_upload_store(uploaded=uploaded, file_name=uploaded.name)
    try:
        with transaction.atomic():
            run = import_run_create(
                source=source,
                path=stored,
                file_name=Path(uploaded.name).name,
                file_format=file_format,
                names=names,
                made_by=user.get_username(),
                requested_by=user,
                owns_file=True,
            )
            transaction.on_commit(lambda: import_run_enqueue(run=run))
    except FormatError as exc:
        stored.unlink(missing_ok=True)
        raise ImportRefused(str(exc), "file") from None
    return run, created


def import_run_enqueue(*, run: ImportRun) -> bool:
    """Queue the run's next step; False when the broker is down (the page queues it again later)."""
    from feedback.tasks import import_file  # tasks import services

    # When the broker is down, import_run_nudge queues it again.
    return jobs.send(import_file, [run.id], if_unreachable=f"import run {run.id} waits") is None


def import_run_nudge(*, run: ImportRun) -> bool:
    """Queue again a run that is active but untouched for a while (its task lost, its worker gone)."""
    now = timezone.now()
    stale = run.is_active and run.updated_at < now - timedelta(seconds=STUCK_SECONDS)
    unclaimed = run.claimed_until is None or run.claimed_until < now
    if stale and unclaimed:
        ImportRun.objects.filter(id=run.id).update(updated_at=now)
        return import_run_enqueue(run=run)
    return False


@dataclass
class StepReport:
    """What one call of import_run_step did; `more` is True when the file is not finished."""

    more: bool = False
    stored: int = 0


@dataclass
class _Batch:
    run: ImportRun
    candidates: list[tuple[int, Candidate]] = field(default_factory=list)
    records: int = 0
    # The checkpoint after this batch: the seq of its last record.
    last_seq: int | None = None


def _claim(run_id: int, now) -> bool:
    """Take the run for CLAIM_SECONDS unless another step holds it; one UPDATE decides, so two never both win."""
    return bool(
        ImportRun.objects.filter(id=run_id, status__in=[ImportRun.Status.QUEUED, ImportRun.Status.RUNNING])
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .update(
            status=ImportRun.Status.RUNNING,
            claimed_until=now + timedelta(seconds=CLAIM_SECONDS),
            updated_at=now,
        )
    )


def import_run_step(
    *,
    run_id: int,
    budget_seconds: float | None = None,
    on_progress: Callable[[ImportRun], None] | None = None,
    on_refusal: Callable[[dict[str, Any]], None] | None = None,
) -> StepReport:
    """Read on from where the run stopped, for up to `budget_seconds` (None: to the end).

    Steps: claim the run (another step holding it, or the run ended: stop
    quietly); read records from `records_done` on; every BATCH_RECORDS
    records map, validate and store them, save the counts and the checkpoint
    and renew the claim; at the end of the file mark the run done and remove
    an uploaded file; when the budget is spent, release the claim and say
    there is more. A file that cannot be read at all fails the run.
    """
    now = timezone.now()
    if not _claim(run_id, now):
        return StepReport()
    run = ImportRun.objects.select_related("source").get(id=run_id)
    if run.started_at is None:
        run.started_at = now
        run.save(update_fields=["started_at"])
    deadline = None if budget_seconds is None else time.monotonic() + budget_seconds
    names = frozenset(run.options.get("names") or ())
    report = StepReport()
    try:
        reader = reader_for(Path(run.path), run.format)
        batch = _Batch(run)
        for record in reader.records(start=run.records_done):
            batch.records += 1
            batch.last_seq = record.seq
            if record.error is not None:
                batch.candidates.append((record.line, refusal(record.error)))
            else:
                for candidate in map_record(record.value, run.format, names=names):
                    candidate.screen_text = record.screen_text
                    batch.candidates.append((record.line, candidate))
            if batch.records >= BATCH_RECORDS:
                report.stored += _settle(batch, reader, on_refusal)
                batch = _Batch(run)
                if on_progress is not None:
                    on_progress(run)
                if deadline is not None and time.monotonic() > deadline:
                    ImportRun.objects.filter(id=run.id).update(claimed_until=None)
                    report.more = True
                    return report
        report.stored += _settle(batch, reader, on_refusal)
    except FormatError as exc:
        _finish(run, ImportRun.Status.FAILED, error=str(exc))
        return report
    except Exception as exc:
        logger.exception("import run %s failed", run.id)
        _finish(run, ImportRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000])
        raise
    run.progress_done = run.progress_total
    _finish(run, ImportRun.Status.DONE)
    if on_progress is not None:
        on_progress(run)
    return report


def _finish(run: ImportRun, status: str, *, error: str = "") -> None:
    run.status = status
    run.error = error
    run.claimed_until = None
    run.finished_at = run.updated_at = timezone.now()
    run.save(update_fields=["status", "error", "claimed_until", "finished_at", "updated_at", "progress_done"])
    if run.options.get("owns_file") and run.path:
        try:
            os.unlink(run.path)
        except FileNotFoundError:
            pass


def _settle(batch: _Batch, reader: Reader, on_refusal) -> int:
    """Validate and store a batch, then save the run's counts and checkpoint together; returns how many were stored."""
    run = batch.run
    stored, duplicates, refusals, skipped = _store(run.source, batch.candidates)
    for refusal in refusals:
        if len(run.refusals) < ImportRun.REFUSALS_KEPT:
            run.refusals.append(refusal)
        if on_refusal is not None:
            on_refusal(refusal)
    run.stored += stored
    run.duplicates += duplicates
    run.refused += len(refusals)
    run.skipped += skipped
    if batch.last_seq is not None:
        run.records_done = batch.last_seq
    run.progress_done = reader.done
    run.updated_at = timezone.now()
    run.claimed_until = run.updated_at + timedelta(seconds=CLAIM_SECONDS)
    run.save(
        update_fields=[
            "stored", "duplicates", "refused", "skipped", "refusals", "records_done", "progress_done",
            "updated_at", "claimed_until",
        ]
    )
    return stored


def _refusal(line: int, candidate: Candidate, reason: str, field_path: str) -> dict[str, Any]:
    shown = candidate.shown_id
    if shown is None and isinstance(candidate.data, dict):
        # The id as the event gives it, when it is text fit to show (as in a webhook's result).
        event_id = candidate.data.get("id")
        if isinstance(event_id, str) and len(event_id) <= 255 and unstorable_error(event_id) is None:
            shown = event_id
    return {"line": line, "id": shown, "field": field_path, "reason": reason}


def _store(source: Source, candidates: list[tuple[int, Candidate]]) -> tuple[int, int, list[dict], int]:
    """(stored, duplicates, refusals, skipped) for one batch of candidates."""
    receipt_id = uuid.uuid4()
    pending: dict[str, FeedbackItem] = {}
    refusals: list[dict[str, Any]] = []
    duplicates = skipped = 0
    for line, candidate in candidates:
        if candidate.kind == "skipped":
            skipped += 1
            continue
        if candidate.kind == "refused":
            refusals.append(_refusal(line, candidate, candidate.reason, candidate.field))
            continue
        item = _item_for(source, candidate, receipt_id)
        if isinstance(item, tuple):
            reason, path = item
            if candidate.prefix:
                reason, path = f"{candidate.prefix}: {reason}", f"{candidate.prefix}: {path}" if path else candidate.prefix
            refusals.append(_refusal(line, candidate, reason, path))
            continue
        if item.external_id in pending:
            duplicates += 1
            continue
        pending[item.external_id] = item
    new = services.items_insert_new(items=list(pending.values()), receipt_id=receipt_id)
    return len(new), duplicates + len(pending) - len(new), refusals, skipped


def _item_for(source: Source, candidate: Candidate, receipt_id: uuid.UUID) -> FeedbackItem | tuple[str, str]:
    """The row for a candidate, or (reason, field) when it breaks a rule a webhook event would break."""
    data = candidate.data
    for value in (data, candidate.raw) if candidate.raw is not data else (data,):
        found = unstorable_error(value, screen_text=candidate.screen_text)
        if found is not None:
            return found
    model = RatingEvent if candidate.kind == "rating" else ReportIn
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        return first_error(exc)
    if parsed.id is None:
        return "id: is required: an imported signal needs its own id, so a re-import can tell it was stored", "id"
    if candidate.kind == "rating":
        return services.rating_item_build(source=source, event=parsed, raw=candidate.raw, receipt_id=receipt_id)
    return services.report_item_build(source=source, report=parsed, raw=candidate.raw, receipt_id=receipt_id)
