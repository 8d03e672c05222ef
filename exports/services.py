"""Writes for the exports: datasets, schedules, export runs and the versions they make."""

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import socket
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import BooleanField, Value
from django.utils import timezone

from exports import selectors
from exports.card import card_text, manifest_build, manifest_bytes
from exports.formats import (
    COLUMNS,
    WRITERS,
    CsvWriter,
    JsonlWriter,
    ParquetWriter,
    Writer,
    csv_reader,
)
from exports.holdout import (
    EvalDeduplicator,
    TrainGuard,
    held_out_summary,
    similarity_threshold,
)
from exports.member_states import ROW_COLUMNS, MemberStates
from exports.models import (
    Dataset,
    DatasetVersion,
    DatasetVersionItem,
    ExportRun,
    Mode,
    Purpose,
)
from exports.records import ExportRecord
from exports.schemas import (
    FORMATS,
    DatasetFilters,
    DatasetIn,
    DatasetPatch,
    ScheduleIn,
    StoredFilters,
)
from exports.written import WrittenStrings
from feedback import custom_patterns
from feedback.models import FeedbackItem, Source
from feedback.scrubber import ScrubMemo
from feedback.text import EMBED_RECIPE
from labeling.audit import audit_record
from labeling.models import Area, Category
from notifications import events as notification_events

logger = logging.getLogger(__name__)

SCHEDULED_TASK = "exports.tasks.scheduled_export"
HOST = socket.gethostname()
MEMBER_BATCH = 2000


class DatasetRefused(Exception):
    """A dataset change that breaks a rule: a one-line message, the field at fault, the HTTP status."""

    def __init__(self, message: str, *, field: str = "", status: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status


class ExportAlreadyRunning(Exception):
    def __init__(self, run: ExportRun) -> None:
        super().__init__(f"an export of '{run.dataset.name}' is already {run.status} (run {run.id})")
        self.run = run


class UnscrubbedOutput(Exception):
    """The files of a version still hold text the scrubber would replace."""


class UnreadableOutput(Exception):
    """A file of a version does not read back as its consumer would read it."""


class HeldOutChanged(Exception):
    """A version of the other purpose was made while this export ran; its check is stale."""


# --- Paths and small helpers -------------------------------------------------------


def export_root() -> Path:
    return Path(settings.EXPORT_ROOT)


def dataset_folder(*, name: str) -> Path:
    return export_root() / name


def version_folder(*, version: DatasetVersion) -> Path:
    return dataset_folder(name=version.dataset.name) / f"v{version.number}"


def stuck_seconds() -> int:
    return settings.EXPORT_STUCK_SECONDS


@functools.cache
def app_version() -> str:
    """APP_VERSION when set, else the checked-out commit (read from .git, no git process), else 'unknown'."""
    configured = settings.APP_VERSION
    if configured:
        return str(configured)
    git = Path(settings.BASE_DIR) / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head[:12]
        ref = head[5:]
        if (git / ref).exists():
            return (git / ref).read_text().strip()[:12]
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0][:12]
    except OSError:
        pass
    return "unknown"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- Datasets ----------------------------------------------------------------------


def _check_filters(filters: DatasetFilters) -> None:
    """Ids and slugs that must exist; the first unknown one is named with its path."""
    if filters.categories:
        known = set(Category.objects.filter(id__in=filters.categories).values_list("id", flat=True))
        for index, category_id in enumerate(filters.categories):
            if category_id not in known:
                raise DatasetRefused(f"no category with id {category_id}", field=f"filters.categories[{index}]")
    if filters.areas:
        # Merged areas are accepted: at export time they stand for the area they went into.
        known = set(Area.objects.filter(id__in=filters.areas).values_list("id", flat=True))
        for index, area_id in enumerate(filters.areas):
            if area_id not in known:
                raise DatasetRefused(f"no area with id {area_id}", field=f"filters.areas[{index}]")
    if filters.sources:
        known = set(Source.objects.filter(slug__in=filters.sources).values_list("slug", flat=True))
        for index, slug in enumerate(filters.sources):
            if slug not in known:
                raise DatasetRefused(f"no source '{slug}'", field=f"filters.sources[{index}]")


def _formats_ordered(formats: list[str]) -> list[str]:
    # A fixed order, so the same choice always gives the same manifest.
    return [name for name in FORMATS if name in set(formats)]


def _name_free(name: str, *, other_than: int | None = None) -> None:
    taken = Dataset.objects.filter(name=name)
    if other_than is not None:
        taken = taken.exclude(id=other_than)
    if taken.exists():
        raise DatasetRefused(f"a dataset named '{name}' exists already", field="name", status=409)


def dataset_create(*, spec: DatasetIn, user=None) -> Dataset:
    """A new dataset; with a schedule when the spec has one (callers check the admin role)."""
    _check_filters(spec.filters)
    _name_free(spec.name)
    now = timezone.now()
    with transaction.atomic():
        try:
            dataset = Dataset.objects.create(
                name=spec.name,
                description=spec.description,
                purpose=spec.purpose,
                filters=spec.filters.stored(),
                formats=_formats_ordered(spec.formats),
                created_by=user if user is not None and user.is_authenticated else None,
                created_at=now,
                updated_at=now,
            )
        except IntegrityError:
            raise DatasetRefused(f"a dataset named '{spec.name}' exists already", field="name", status=409) from None
        if spec.schedule is not None:
            dataset_schedule_set(dataset=dataset, schedule=spec.schedule, user=user, audit=False)
        _audit(user, "dataset.create", dataset, {"purpose": dataset.purpose, "filters": dataset.filters})
    return dataset


def dataset_update(*, dataset: Dataset, patch: DatasetPatch, user=None) -> Dataset:
    """Change what was sent. The name and purpose are fixed once a version exists."""
    sent = patch.model_fields_set
    has_versions = dataset.versions.exists()
    changes: dict[str, Any] = {}
    if "name" in sent and patch.name is not None and patch.name != dataset.name:
        if has_versions:
            raise DatasetRefused("the name is the folder of existing versions and cannot change", field="name")
        _name_free(patch.name, other_than=dataset.id)
        changes["name"] = patch.name
    if "purpose" in sent and patch.purpose is not None and patch.purpose != dataset.purpose:
        if has_versions:
            raise DatasetRefused(
                "the purpose cannot change once a version exists; define a new dataset", field="purpose"
            )
        changes["purpose"] = patch.purpose
    if "description" in sent and patch.description is not None:
        changes["description"] = patch.description
    if "filters" in sent and patch.filters is not None:
        _check_filters(patch.filters)
        changes["filters"] = patch.filters.stored()
    if "formats" in sent and patch.formats is not None:
        changes["formats"] = _formats_ordered(patch.formats)
    changes = {name: value for name, value in changes.items() if getattr(dataset, name) != value}
    with transaction.atomic():
        if changes:
            before = {name: getattr(dataset, name) for name in changes}
            for name, value in changes.items():
                setattr(dataset, name, value)
            dataset.updated_at = timezone.now()
            try:
                dataset.save(update_fields=[*changes, "updated_at"])
            except IntegrityError:
                raise DatasetRefused("a dataset with that name exists already", field="name", status=409) from None
            _audit(user, "dataset.update", dataset, {"before": before, "after": changes})
        if "schedule" in sent and patch.schedule is not None:
            dataset_schedule_set(dataset=dataset, schedule=patch.schedule, user=user)
    return dataset


def cron_fields(cron: str) -> dict[str, str]:
    """The five fields of a cron expression as CrontabSchedule columns; DatasetRefused if malformed."""
    from celery.schedules import crontab
    from django.core.exceptions import ValidationError
    from django_celery_beat.validators import crontab_validator

    parts = cron.split()
    if len(parts) != 5:
        raise DatasetRefused(
            f"a schedule is five cron fields (minute hour day-of-month month day-of-week), got {len(parts)}",
            field="schedule.cron",
        )
    try:
        crontab_validator(" ".join(parts))
        minute, hour, day_of_month, month_of_year, day_of_week = parts
        crontab(
            minute=minute, hour=hour, day_of_week=day_of_week, day_of_month=day_of_month, month_of_year=month_of_year
        )
    except (ValidationError, ValueError) as exc:
        message = exc.messages[0] if isinstance(exc, ValidationError) else str(exc)
        raise DatasetRefused(f"not a valid cron expression: {message}", field="schedule.cron") from None
    return {
        "minute": minute,
        "hour": hour,
        "day_of_month": day_of_month,
        "month_of_year": month_of_year,
        "day_of_week": day_of_week,
    }


def dataset_schedule_set(*, dataset: Dataset, schedule: ScheduleIn, user=None, audit: bool = True) -> Dataset:
    """Set or clear (empty cron) the dataset's schedule: one PeriodicTask that celery beat reads.

    Admins only; the views and the API check the role before calling.
    """
    from django_celery_beat.models import CrontabSchedule, PeriodicTask

    cron = " ".join(schedule.cron.split())
    before = {"cron": dataset.schedule_cron, "mode": dataset.schedule_mode}
    with transaction.atomic():
        if not cron:
            if dataset.periodic_task_id:
                PeriodicTask.objects.filter(id=dataset.periodic_task_id).delete()
            dataset.periodic_task = None
        else:
            fields = cron_fields(cron)
            crontab_row = CrontabSchedule.objects.filter(timezone="UTC", **fields).first()
            if crontab_row is None:
                crontab_row = CrontabSchedule.objects.create(timezone="UTC", **fields)
            task = dataset.periodic_task or PeriodicTask(name=f"export dataset {dataset.id}")
            task.task = SCHEDULED_TASK
            task.crontab = crontab_row
            task.interval = task.solar = task.clocked = None
            task.args = json.dumps([dataset.id])
            task.enabled = True
            task.description = f"Scheduled export of the dataset '{dataset.name}' ({schedule.mode})."
            # save(), not update(): beat notices changes through the model's signals.
            task.save()
            dataset.periodic_task = task
        dataset.schedule_cron = cron
        dataset.schedule_mode = schedule.mode
        dataset.updated_at = timezone.now()
        dataset.save(update_fields=["periodic_task", "schedule_cron", "schedule_mode", "updated_at"])
        if audit and before != {"cron": cron, "mode": schedule.mode}:
            _audit(
                user, "dataset.schedule", dataset, {"before": before, "after": {"cron": cron, "mode": schedule.mode}}
            )
    return dataset


def dataset_delete(*, dataset: Dataset, user=None) -> None:
    """Delete a dataset, its schedule, versions and files (admins only).

    Deleting an eval dataset releases its items: later train exports may take them.
    """
    from django_celery_beat.models import PeriodicTask

    with transaction.atomic():
        active = dataset.runs.filter(active=True).first()
        if active is not None:
            raise DatasetRefused(
                f"an export is {active.status} (run {active.id}); delete the dataset when it has finished",
                status=409,
            )
        folder = dataset_folder(name=dataset.name)
        details = {"name": dataset.name, "purpose": dataset.purpose, "versions": dataset.versions.count()}
        if dataset.periodic_task_id:
            PeriodicTask.objects.filter(id=dataset.periodic_task_id).delete()
        _audit(user, "dataset.delete", dataset, details)
        dataset.delete()
        transaction.on_commit(lambda: shutil.rmtree(folder, ignore_errors=True))


def _audit(user, action: str, dataset: Dataset, details: dict) -> None:
    actor = user if user is not None and getattr(user, "is_authenticated", False) else None
    audit_record(actor=actor, action=action, details={"dataset": dataset.name, "dataset_id": dataset.id, **details})


# --- Export runs -------------------------------------------------------------------


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        # A killed child that its parent has not reaped yet still answers signals.
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _run_abandoned(run: ExportRun, *, now: datetime) -> str:
    """Why an active run will never finish, or '' if it may still."""
    stale = now - timedelta(seconds=stuck_seconds())
    if run.status == ExportRun.Status.RUNNING:
        if run.host == HOST and run.pid and run.pid != os.getpid() and _process_gone(run.pid):
            return "stopped: its process ended before the export was written"
        if run.heartbeat_at is not None and run.heartbeat_at < stale:
            return "stopped: no progress from its worker"
    elif run.status == ExportRun.Status.QUEUED and run.created_at < stale:
        return "stopped: no worker picked it up"
    return ""


def export_runs_reset_stuck(*, dataset: Dataset | None = None, now: datetime | None = None) -> int:
    """Fail active runs whose worker died or stopped beating, so the next run can start."""
    now = now or timezone.now()
    runs = ExportRun.objects.filter(active=True)
    if dataset is not None:
        runs = runs.filter(dataset=dataset)
    reset = 0
    for run in runs:
        reason = _run_abandoned(run, now=now)
        if reason:
            # Only if nobody touched it since it was read.
            reset += ExportRun.objects.filter(id=run.id, active=True, heartbeat_at=run.heartbeat_at).update(
                status=ExportRun.Status.FAILED, active=None, error=reason, finished_at=now
            )
    return reset


def export_run_start(
    *,
    dataset: Dataset,
    trigger: str,
    user=None,
    made_by: str = "",
    mode: str = Mode.SNAPSHOT,
    force: bool = False,
    enqueue: bool = True,
) -> ExportRun:
    """A queued run, handed to a worker after commit; ExportAlreadyRunning while one is active.

    With ``enqueue=False`` the caller executes the run itself (command, schedule).
    Without ``force`` a run whose data equals the latest version's makes none.
    """
    export_runs_reset_stuck(dataset=dataset)
    user = user if user is not None and getattr(user, "is_authenticated", False) else None
    made_by = made_by or (user.get_username() if user else trigger)
    try:
        with transaction.atomic():
            run = ExportRun.objects.create(
                dataset=dataset, trigger=trigger, requested_by=user, made_by=made_by, mode=mode, force=force
            )
    except IntegrityError:
        active = ExportRun.objects.select_related("dataset").filter(dataset=dataset, active=True).first()
        if active is None:  # it finished in between: the caller may simply try again
            raise
        raise ExportAlreadyRunning(active) from None
    if user is not None:
        _audit(user, "dataset.export", dataset, {"run": run.id, "mode": mode, "force": force})
    if enqueue:
        transaction.on_commit(lambda: export_run_enqueue(run_id=run.id))
    return run


def export_run_enqueue(*, run_id: int) -> bool:
    """Hand the run to a worker; when the broker is unreachable the run fails at once with that reason."""
    from exports.tasks import export_run  # tasks import services

    return ExportRun.enqueue(export_run, run_id=run_id, then="export again later")


def _run_claim(run_id: int) -> ExportRun | None:
    """Take a queued run, or one whose worker died (a redelivered task); None if it is not ours to do."""
    now = timezone.now()
    claim = {
        "status": ExportRun.Status.RUNNING,
        "started_at": now,
        "heartbeat_at": now,
        "host": HOST,
        "pid": os.getpid(),
    }
    if ExportRun.objects.filter(id=run_id, status=ExportRun.Status.QUEUED).update(**claim):
        return ExportRun.objects.select_related("dataset", "requested_by").get(id=run_id)
    run = ExportRun.objects.filter(id=run_id, status=ExportRun.Status.RUNNING).first()
    taken_over = (
        run is not None
        and _run_abandoned(run, now=now)
        and ExportRun.objects.filter(id=run_id, heartbeat_at=run.heartbeat_at).update(**claim, processed=0)
    )
    return ExportRun.objects.select_related("dataset", "requested_by").get(id=run_id) if taken_over else None


def export_run_execute(*, run_id: int) -> DatasetVersion | None:
    """Write the next version of the run's dataset.

    Steps: claim the run (stop quietly if it is gone or someone else's);
    stream the matching items in id order from a server-side cursor, drop
    what the held-out promise forbids, feed every format writer; write the
    README card and manifest with checksums; then in one transaction record
    the version and its members and rename the temporary folder into place.
    A failure marks the run failed with its error and leaves no version.
    """
    run = _run_claim(run_id)
    if run is None:
        return None
    try:
        try:
            return _export(run)
        except HeldOutChanged:
            # Rare: an export of the other purpose committed meanwhile. Once
            # more from the start, against the new set of versions.
            run.update(stage="restarting: another dataset's version changed what is held out", processed=0)
            return _export(run)
    except Exception as exc:
        logger.exception("export run %s failed", run_id)
        ExportRun.objects.filter(id=run.id).update(
            status=ExportRun.Status.FAILED,
            active=None,
            stage="failed",
            finished_at=timezone.now(),
            heartbeat_at=timezone.now(),
            error=f"{type(exc).__name__}: {exc}"[:2000],
        )
        notification_events.export_failed(run_id=run.id)
        raise


@dataclass
class Written:
    files: list[dict]
    manifest: dict
    manifest_sha256: str
    counts: dict


class _Counts:
    def __init__(self, *, disputed_left_out: int | None = None) -> None:
        self.items = 0
        # Items the filters may take that wait for a settlement of their reviewers'
        # disagreement; None (versions made before disputes were counted) leaves the key out.
        self.disputed_left_out = disputed_left_out
        self.by_category = Counter()
        self.by_area = Counter()
        self.by_model_version = Counter()
        self.by_split = Counter()
        self.scrubbed = Counter()

    def add(self, records: list[ExportRecord]) -> None:
        for record in records:
            self.items += 1
            self.scrubbed.update(record.scrubbed)
            self.by_category[record.category or "(none)"] += 1
            self.by_area[record.area or "(none)"] += 1
            self.by_model_version[record.model_version or "(none)"] += 1
            self.by_split[record.split or "unlabelled"] += 1

    def as_dict(self) -> dict:
        return {
            "items": self.items,
            "by_category": dict(sorted(self.by_category.items())),
            "by_area": dict(sorted(self.by_area.items())),
            "by_model_version": dict(sorted(self.by_model_version.items())),
            "by_split": dict(sorted(self.by_split.items())),
        } | ({} if self.disputed_left_out is None else {"disputed_left_out": self.disputed_left_out})


def _last_line(path: Path, size: int) -> bytes:
    """The last line of a file (without its newline), read from the end in growing blocks."""
    block = 1 << 16
    with open(path, "rb") as handle:
        while True:
            start = max(0, size - 1 - block)
            handle.seek(start)
            tail = handle.read(size - 1 - start)
            cut = tail.rfind(b"\n")
            if cut >= 0 or start == 0:
                return tail[cut + 1 :]
            block *= 4


def _check_loadable(writers: list[Writer]) -> None:
    """Read each closed file back as its consumer would, on a sample; UnreadableOutput if one fails.

    Every file: on disk with exactly the bytes hashed while writing. JSONL:
    ends in a newline, and its first and last lines are JSON objects. CSV:
    the header names the columns and the first row has a cell for each.
    Parquet: the footer opens, its schema and row count are the writer's, and
    its last row group reads. The texts of every row were checked while they
    were written (exports.written), so nothing here reads a whole file again.
    """
    for writer in writers:
        path = writer.path
        size = path.stat().st_size
        problem = ""
        if size != writer.size:
            problem = f"{size} bytes on disk, {writer.size} written"
        elif isinstance(writer, JsonlWriter) and writer.rows:
            with open(path, "rb") as handle:
                first = handle.readline()
                handle.seek(size - 1)
                ends_in_newline = handle.read(1) == b"\n"
            try:
                loadable = all(isinstance(json.loads(line), dict) for line in (first, _last_line(path, size)))
            except ValueError:
                loadable = False
            if not ends_in_newline or not loadable:
                problem = "a line is not a JSON object"
        elif isinstance(writer, CsvWriter):
            with open(path, encoding="utf-8", newline="") as handle:
                reader = csv_reader(handle)
                header = next(reader, [])
                first = next(reader, None) if writer.rows else None
            if header != [name for name, _, _ in COLUMNS] or (writer.rows and (first is None or len(first) != len(header))):
                problem = "the header or first row does not read back"
        elif isinstance(writer, ParquetWriter):
            parquet = pq.ParquetFile(path)
            groups = parquet.metadata.num_row_groups
            if parquet.metadata.num_rows != writer.rows or not parquet.schema_arrow.equals(writer.schema):
                problem = f"{parquet.metadata.num_rows} rows or its schema differ from what was written"
            elif groups and parquet.read_row_group(groups - 1).num_rows != parquet.metadata.row_group(groups - 1).num_rows:
                problem = "its last row group does not read back"
        if problem:
            raise UnreadableOutput(f"{writer.file_name} does not read back: {problem}")


def _merge_found(found: dict[str, set[str]], more: dict[str, set[str]]) -> None:
    for name, files in more.items():
        found.setdefault(name, set()).update(files)


def _write_folder(
    *,
    folder: Path,
    meta: dict,
    batches: Iterator[list[ExportRecord]],
    held_out: Callable[[], dict],
    extra_patterns: Sequence[tuple[str, str]],
    counts: _Counts | None = None,
    memo: ScrubMemo | None = None,
) -> Written:
    """Every file of a version into `folder`: data files, README.md, then manifest.json.

    `extra_patterns` are the custom scrub patterns the records were scrubbed
    with; the self-check looks for them too. It checks every string of every
    row as the row is written (exports.written), each distinct text once per
    export (`memo`, the records' scrub memo when given: a text they were
    scrubbed to unchanged is known clean), and fails the version with
    UnscrubbedOutput naming each pattern and the files holding it. Then each
    file is read back on a sample (_check_loadable).
    """
    writers: list[Writer] = [WRITERS[name](folder) for name in meta["formats"]]
    counts = _Counts() if counts is None else counts
    memo = memo if memo is not None else ScrubMemo(extra_patterns)
    sink = WrittenStrings(memo)
    for writer in writers:
        writer.sink = sink
    found = sink.found
    try:
        for records in batches:
            counts.add(records)
            for writer in writers:
                writer.write(records)
            _merge_found(found, sink.check(memo))
    finally:
        for writer in writers:
            writer.close()
    _merge_found(found, sink.check(memo))  # rows written at close: pairs across items
    if found:
        details = "; ".join(f"{name} in {', '.join(sorted(files))}" for name, files in sorted(found.items()))
        raise UnscrubbedOutput(f"the export files still hold unscrubbed text: {details}")
    _check_loadable(writers)
    files = [
        {
            "name": writer.file_name,
            "format": writer.format_name,
            "rows": writer.rows,
            "bytes": writer.path.stat().st_size,
            "sha256": writer.sha256,
        }
        for writer in writers
    ]
    summary = counts.as_dict()
    summary["rows_by_format"] = {entry["format"]: entry["rows"] for entry in files}
    # Each writer says why it wrote nothing: the manifest and the card name the reason.
    empty_formats = {writer.format_name: writer.empty_reason for writer in writers if not writer.rows}
    held = held_out()
    readme = folder / "README.md"
    readme.write_text(
        card_text(meta=meta, counts=summary, held_out=held, files=files, empty_formats=empty_formats),
        encoding="utf-8",
        newline="\n",
    )
    files.append(
        {"name": "README.md", "format": "card", "rows": None, "bytes": readme.stat().st_size, "sha256": _sha256(readme)}
    )
    files.sort(key=lambda entry: entry["name"])
    scrubbed = dict(sorted(counts.scrubbed.items()))
    manifest = manifest_build(
        meta=meta, counts=summary, held_out=held, files=files, scrubbed=scrubbed, empty_formats=empty_formats
    )
    content = manifest_bytes(manifest)
    (folder / "manifest.json").write_bytes(content)
    for path in folder.iterdir():
        _fsync(path)
    _fsync(folder)
    return Written(files=files, manifest=manifest, manifest_sha256=hashlib.sha256(content).hexdigest(), counts=summary)


def _version_meta(
    *,
    dataset: Dataset,
    number: int,
    purpose: str,
    mode: str,
    base_number: int | None,
    filters: dict,
    formats: list[str],
    created_at: datetime,
    made_by: str,
    trigger: str,
    app_version: str,
) -> dict:
    return {
        "dataset": dataset.name,
        "description": dataset.description,
        "number": number,
        "purpose": purpose,
        "mode": mode,
        "base_number": base_number,
        "filters": filters,
        "formats": formats,
        "created_at": created_at,
        "made_by": made_by,
        "trigger": trigger,
        "app_version": app_version,
    }


_LEFTOVER = re.compile(r"^\.v(\d+)\.(tmp|verify)-(\d+)$")
_VERSION_DIR = re.compile(r"^v(\d+)$")


def _clean_leftovers(*, root: Path, dataset: Dataset, run: ExportRun) -> None:
    """Remove what killed runs left: temporary folders, and a version folder whose row never committed."""
    numbers = set(dataset.versions.values_list("number", flat=True))
    for entry in root.iterdir():
        leftover = _LEFTOVER.match(entry.name)
        orphan = _VERSION_DIR.match(entry.name)
        if leftover and leftover.group(2) == "tmp":
            stale = int(leftover.group(3)) != run.id
        elif leftover:  # a verification's scratch folder, named by its process id
            stale = _process_gone(int(leftover.group(3)))
        else:
            stale = bool(orphan) and int(orphan.group(1)) not in numbers
        if stale:
            logger.warning("removing %s, left by an export that did not finish", entry)
            shutil.rmtree(entry, ignore_errors=True)


def _held_out_guard(
    *,
    dataset: Dataset,
    purpose: str,
    threshold: float,
    seed_earlier: bool,
    extra_patterns: Sequence[tuple[str, str]],
    heartbeat: Callable[[], None],
    memo: ScrubMemo | None = None,
) -> tuple[TrainGuard | EvalDeduplicator, bool, dict]:
    """What decides which matching items stay out, whether it needs vectors, and what it checks against.

    A train export reads the eval items as records, exactly as it reads its
    own items (same scrubbing, same conversation), so both sides are keyed
    alike; eval items without a vector of the current recipe are embedded
    by the guard (HeldOutUncheckable when that fails).
    """
    if purpose == Purpose.TRAIN:
        eval_items = selectors.eval_member_items()
        guard = TrainGuard(
            eval_records=selectors.records_stream(
                eval_items, with_vector=True, extra_patterns=extra_patterns, memo=memo
            ),
            outdated_ids=set(eval_items.exclude(embed_recipe=EMBED_RECIPE).values_list("id", flat=True)),
            threshold=threshold,
            extra_patterns=extra_patterns,
            heartbeat=heartbeat,
        )
        checked = {
            "eval_items": guard.eval_item_count,
            "eval_versions": DatasetVersion.objects.filter(purpose=Purpose.EVAL).count(),
        }
        if guard.embedded_now:
            checked["eval_items_embedded_for_the_check"] = guard.embedded_now
        # Without eval vectors there is nothing to compare with: skip reading them.
        return guard, len(guard.vectors) > 0, checked
    deduplicator = EvalDeduplicator(threshold=threshold)
    if seed_earlier:
        # Incremental: the items of earlier versions of this eval set count as already kept.
        earlier = FeedbackItem.objects.filter(selectors.in_versions_of(dataset=dataset))
        for records in selectors.records_stream(earlier, with_vector=True):
            deduplicator.keep(records)
        deduplicator.held.clear()
    return deduplicator, True, {"train_versions": DatasetVersion.objects.filter(purpose=Purpose.TRAIN).count()}


def _export(run: ExportRun) -> DatasetVersion:
    dataset = run.dataset
    # As stored: a day saved before the range was checked still exports (see selectors.items_matching).
    filters = StoredFilters.model_validate(dataset.filters)
    formats = _formats_ordered(dataset.formats)
    purpose = dataset.purpose
    previous = dataset.versions.order_by("-number").first()
    number = (previous.number if previous else 0) + 1
    incremental = run.mode == Mode.INCREMENTAL
    opposite = Purpose.EVAL if purpose == Purpose.TRAIN else Purpose.TRAIN
    # Versions of the other purpose known now; one committed later invalidates the check.
    opposite_seen = (
        DatasetVersion.objects.filter(purpose=opposite).order_by("-id").values_list("id", flat=True).first() or 0
    )
    meta = _version_meta(
        dataset=dataset,
        number=number,
        purpose=purpose,
        mode=run.mode,
        base_number=previous.number if incremental and previous else None,
        filters=filters.stored(),
        formats=formats,
        created_at=run.started_at.replace(microsecond=0),
        made_by=run.made_by or run.trigger,
        trigger=run.trigger,
        app_version=app_version(),
    )
    root = dataset_folder(name=dataset.name)
    root.mkdir(parents=True, exist_ok=True)
    _clean_leftovers(root=root, dataset=dataset, run=run)
    temporary = root / f".v{number}.tmp-{run.id}"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir()

    try:
        run.update(stage="checking held-out items", progress=0.01)
        threshold = similarity_threshold()
        items = selectors.items_matching(filters=filters, pinned_to=dataset.id)
        pinned = selectors.pinned_item_ids(dataset_id=dataset.id)
        if incremental:
            items = items.exclude(selectors.in_versions_of(dataset=dataset))
        # Read before the guard: the eval items are scrubbed and keyed with the same patterns as these.
        extra_patterns = custom_patterns.all_sources(fresh=True)
        # One scrub memo for the export: its items, the eval items it checks against, and its self-check.
        memo = ScrubMemo(extra_patterns)
        guard, with_vector, checked = _held_out_guard(
            dataset=dataset,
            purpose=purpose,
            threshold=threshold,
            seed_earlier=incremental and previous is not None,
            extra_patterns=extra_patterns,
            memo=memo,
            heartbeat=lambda: run.update(stage="embedding eval items for the held-out check"),
        )
        total = items.count()
        items = items.annotate(in_opposite_purpose=selectors.in_versions_of(purpose=opposite))
        category_ids = selectors.categories_with_merged(filters.categories)
        # Ids and what each member looked like, gathered in the writing pass itself.
        member_states = MemberStates()
        member_ids = member_states.ids
        run.update(stage="writing files", total=total, processed=0, progress=0.02)

        disputed: list[int] = []
        counts = _Counts(disputed_left_out=0)

        def batches() -> Iterator[list[ExportRecord]]:
            seen = 0
            for records in selectors.records_stream(
                items, with_vector=with_vector, extra_patterns=extra_patterns, disputed=disputed, memo=memo
            ):
                seen += len(records)
                kept = guard.keep(
                    [
                        r
                        for r in records
                        if r.id in pinned or selectors.record_passes(r, filters, category_ids=category_ids)
                    ]
                )
                member_states.add(kept)
                yield kept
                done = seen + len(disputed)
                run.update(processed=done, progress=0.02 + 0.9 * done / max(total, 1))
            counts.disputed_left_out = len(disputed)

        written = _write_folder(
            folder=temporary,
            meta=meta,
            batches=batches(),
            held_out=lambda: held_out_summary(held=guard.held, threshold=threshold, checked_against=checked),
            extra_patterns=extra_patterns,
            counts=counts,
            memo=memo,
        )
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    if not run.force and previous is not None and _same_data(previous, written=written, member_ids=member_ids):
        shutil.rmtree(temporary, ignore_errors=True)
        return _run_unchanged(run, matched=previous)
    run.update(stage="saving the version", progress=0.95)
    return _version_commit(
        run=run,
        meta=meta,
        written=written,
        member_ids=member_ids,
        member_states=member_states,
        temporary=temporary,
        target=root / f"v{number}",
        opposite=opposite,
        opposite_seen=opposite_seen,
    )


def _data_files(files: list[dict]) -> list[tuple[str, str]]:
    return sorted((entry["name"], entry["sha256"]) for entry in files if entry.get("format") != "card")


def _same_data(previous: DatasetVersion, *, written: Written, member_ids: array) -> bool:
    """Would this version hold what `previous` holds? Items and data files; the README card may differ.

    The checksums come from the writing pass itself, so this costs one read
    of the previous version's member ids, never a second read of the files.
    """
    if written.manifest["mode"] == Mode.INCREMENTAL:
        return len(member_ids) == 0  # nothing new since the latest version
    if previous.item_count != len(member_ids) or _data_files(previous.files) != _data_files(written.files):
        return False
    earlier = previous.members.order_by("item_id").values_list("item_id", flat=True)
    return array("q", earlier.iterator(chunk_size=10_000)) == member_ids


def _run_unchanged(run: ExportRun, *, matched: DatasetVersion) -> DatasetVersion:
    """End the run as unchanged, naming the version it equalled; no version, no folder."""
    finished = ExportRun.objects.filter(id=run.id, status=ExportRun.Status.RUNNING, host=HOST, pid=os.getpid()).update(
        status=ExportRun.Status.UNCHANGED,
        active=None,
        stage=f"unchanged since v{matched.number}",
        progress=1.0,
        matched_version=matched,
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    if not finished:
        raise RuntimeError("the run was taken over or reset while it was writing")
    run.refresh_from_db()
    return matched


def _members_insert(*, version_id: int, members: MemberStates) -> None:
    """Record the members and their exported states with plain executemany.

    For 100,000 rows, model instances cost seconds.
    """
    quote = connection.ops.quote_name
    table = DatasetVersionItem._meta.db_table
    columns = ", ".join(quote(column) for column in ROW_COLUMNS)
    sql = f"INSERT INTO {quote(table)} ({columns}) VALUES ({', '.join(['%s'] * len(ROW_COLUMNS))})"
    with connection.cursor() as cursor:
        for start in range(0, len(members), MEMBER_BATCH):
            cursor.executemany(sql, list(members.rows(version_id=version_id, start=start, stop=start + MEMBER_BATCH)))


def _version_commit(
    *,
    run: ExportRun,
    meta: dict,
    written: Written,
    member_ids: array,
    member_states: MemberStates,
    temporary: Path,
    target: Path,
    opposite: str,
    opposite_seen: int,
) -> DatasetVersion:
    """Record the version and its members and move its folder into place, all or nothing."""
    renamed = False
    try:
        with transaction.atomic():
            # Train and eval commits take turns: each checks, under the lock,
            # that no version of the other purpose appeared since it started.
            list(Dataset.objects.select_for_update(no_key=True).order_by("id").values_list("id", flat=True))
            if DatasetVersion.objects.filter(purpose=opposite, id__gt=opposite_seen).exists():
                raise HeldOutChanged()
            version = DatasetVersion.objects.create(
                dataset=run.dataset,
                number=meta["number"],
                purpose=meta["purpose"],
                mode=meta["mode"],
                base_number=meta["base_number"],
                filters=meta["filters"],
                formats=meta["formats"],
                trigger=meta["trigger"],
                created_by=run.requested_by,
                made_by=meta["made_by"],
                app_version=meta["app_version"],
                created_at=meta["created_at"],
                item_count=len(member_ids),
                counts=written.counts,
                held_out=written.manifest["held_out"],
                files=[entry for entry in written.files],
                manifest=written.manifest,
                manifest_sha256=written.manifest_sha256,
                members_recorded=True,
            )
            _members_insert(version_id=version.id, members=member_states)
            # Still ours? A run reset as stuck meanwhile must not also make a version.
            finished = ExportRun.objects.filter(
                id=run.id, status=ExportRun.Status.RUNNING, host=HOST, pid=os.getpid()
            ).update(
                status=ExportRun.Status.DONE,
                active=None,
                stage="done",
                progress=1.0,
                version=version,
                finished_at=timezone.now(),
                heartbeat_at=timezone.now(),
            )
            if not finished:
                raise RuntimeError("the run was taken over or reset while it was writing")
            notification_events.export_version_made(version=version, run=run)
            os.rename(temporary, target)
            renamed = True
            _fsync(target.parent)
    except BaseException:
        if renamed:
            shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    run.refresh_from_db()
    return version


# --- Checking a version: rewrite it and compare -------------------------------------


def dataset_version_write(*, version: DatasetVersion, folder: Path) -> Written:
    """Write a version's files again from its recorded members and facts.

    Nothing is filtered or held out anew (membership is final), and every
    timestamp and name comes from the version row, so with unchanged items
    the bytes equal the original ones.
    """
    meta = _version_meta(
        dataset=version.dataset,
        number=version.number,
        purpose=version.purpose,
        mode=version.mode,
        base_number=version.base_number,
        filters=version.filters,
        formats=version.formats,
        created_at=version.created_at,
        made_by=version.made_by,
        trigger=version.trigger,
        app_version=version.app_version,
    )
    meta["description"] = version.manifest.get("description", version.dataset.description)
    items = selectors.version_members(version=version).annotate(
        in_opposite_purpose=Value(False, output_field=BooleanField())
    )
    # Today's scrub patterns: a pattern added since the version was written
    # makes the rewrite differ, which is the cue to export again.
    extra_patterns = custom_patterns.all_sources(fresh=True)
    memo = ScrubMemo(extra_patterns)
    return _write_folder(
        folder=folder,
        meta=meta,
        batches=selectors.records_stream(items, with_vector=False, extra_patterns=extra_patterns, memo=memo),
        held_out=lambda: version.held_out,
        extra_patterns=extra_patterns,
        memo=memo,
        # As recorded: the rewrite of a version must reproduce its manifest byte for byte.
        counts=_Counts(disputed_left_out=version.counts.get("disputed_left_out")),
    )


@dataclass
class VersionCheck:
    identical: bool
    differing: list[str]
    restored: bool = False


def dataset_version_verify(*, version: DatasetVersion) -> VersionCheck:
    """Rewrite a version beside its folder and compare every checksum with the recorded ones.

    A version whose folder has gone missing is restored from the rewrite when it matches.
    """
    target = version_folder(version=version)
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.parent / f".v{version.number}.verify-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    try:
        written = dataset_version_write(version=version, folder=scratch)
        recorded = {entry["name"]: entry["sha256"] for entry in version.files}
        recorded["manifest.json"] = version.manifest_sha256
        rewritten = {entry["name"]: entry["sha256"] for entry in written.files}
        rewritten["manifest.json"] = written.manifest_sha256
        differing = sorted(
            name for name in recorded.keys() | rewritten.keys() if recorded.get(name) != rewritten.get(name)
        )
        if not differing and not target.exists():
            os.rename(scratch, target)
            return VersionCheck(identical=True, differing=[], restored=True)
        return VersionCheck(identical=not differing, differing=differing)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
