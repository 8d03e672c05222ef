"""Export runs: started once per dataset at a time, claimed by a worker, written, checked, and committed as a version.

A run whose process died or stopped beating is failed by the next start, so a
dataset is never blocked; a run whose data equals the latest version's ends
"unchanged" and makes no version."""

import logging
import os
import re
import shutil
import socket
from array import array
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from exports import signals, writing
from exports.datasets import dataset_audit, formats_ordered
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
from exports.schemas import StoredFilters
from exports.selectors import (
    categories_with_merged,
    eval_member_items,
    in_versions_of,
    items_matching,
    pinned_item_ids,
    record_passes,
    records_stream,
)
from exports.writing import (
    Counts,
    Written,
    app_version,
    dataset_folder,
    version_meta,
    write_folder,
)
from feedback import custom_patterns
from feedback.models import FeedbackItem
from feedback.scrubber import ScrubMemo
from feedback.text import EMBED_RECIPE

logger = logging.getLogger(__name__)
HOST = socket.gethostname()
MEMBER_BATCH = 2000


class ExportAlreadyRunning(Exception):
    def __init__(self, run: ExportRun) -> None:
        super().__init__(f"an export of '{run.dataset.name}' is already {run.status} (run {run.id})")
        self.run = run


class HeldOutChanged(Exception):
    """A version of the other purpose was made while this export ran; its check is stale."""


def stuck_seconds() -> int:
    return settings.EXPORT_STUCK_SECONDS


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
    """Why an active run will never finish, or '' if it may still: its process seen gone on this host,
    then what every job run knows (core.jobs.JobRun.stuck_reason)."""
    if run.status == ExportRun.Status.RUNNING:
        if run.host == HOST and run.pid and run.pid != os.getpid() and _process_gone(run.pid):
            return "stopped: its process ended before the export was written"
    return run.stuck_reason(now=now, stuck_seconds=stuck_seconds())


def export_runs_reset_stuck(*, dataset: Dataset | None = None, now: datetime | None = None) -> int:
    """Fail active runs whose worker died or stopped beating, so the next run can start."""
    now = now or timezone.now()
    runs = ExportRun.objects.all() if dataset is None else ExportRun.objects.filter(dataset=dataset)
    return ExportRun.reset_stuck(
        runs, now=now, stuck_seconds=stuck_seconds(), reason_of=lambda run: _run_abandoned(run, now=now)
    )


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
        dataset_audit(user, "dataset.export", dataset, {"run": run.id, "mode": mode, "force": force})
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
        signals.export_failed.send(sender=ExportRun, run_id=run.id)
        raise


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
        eval_items = eval_member_items()
        guard = TrainGuard(
            eval_records=records_stream(
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
        earlier = FeedbackItem.objects.filter(in_versions_of(dataset=dataset))
        for records in records_stream(earlier, with_vector=True):
            deduplicator.keep(records)
        deduplicator.held.clear()
    return deduplicator, True, {"train_versions": DatasetVersion.objects.filter(purpose=Purpose.TRAIN).count()}


def _export(run: ExportRun) -> DatasetVersion:
    dataset = run.dataset
    # As stored: a day saved before the range was checked still exports (see items_matching).
    filters = StoredFilters.model_validate(dataset.filters)
    formats = formats_ordered(dataset.formats)
    purpose = dataset.purpose
    previous = dataset.versions.order_by("-number").first()
    number = (previous.number if previous else 0) + 1
    incremental = run.mode == Mode.INCREMENTAL
    opposite = Purpose.EVAL if purpose == Purpose.TRAIN else Purpose.TRAIN
    # Versions of the other purpose known now; one committed later invalidates the check.
    opposite_seen = (
        DatasetVersion.objects.filter(purpose=opposite).order_by("-id").values_list("id", flat=True).first() or 0
    )
    meta = version_meta(
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
        items = items_matching(filters=filters, pinned_to=dataset.id)
        pinned = pinned_item_ids(dataset_id=dataset.id)
        if incremental:
            items = items.exclude(in_versions_of(dataset=dataset))
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
        items = items.annotate(in_opposite_purpose=in_versions_of(purpose=opposite))
        category_ids = categories_with_merged(filters.categories)
        # Ids and what each member looked like, gathered in the writing pass itself.
        member_states = MemberStates()
        member_ids = member_states.ids
        run.update(stage="writing files", total=total, processed=0, progress=0.02)

        disputed: list[int] = []
        counts = Counts(disputed_left_out=0)

        def batches() -> Iterator[list[ExportRecord]]:
            seen = 0
            for records in records_stream(
                items, with_vector=with_vector, extra_patterns=extra_patterns, disputed=disputed, memo=memo
            ):
                seen += len(records)
                kept = guard.keep(
                    [
                        r
                        for r in records
                        if r.id in pinned or record_passes(r, filters, category_ids=category_ids)
                    ]
                )
                member_states.add(kept)
                yield kept
                done = seen + len(disputed)
                run.update(processed=done, progress=0.02 + 0.9 * done / max(total, 1))
            counts.disputed_left_out = len(disputed)

        written = write_folder(
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
            signals.export_version_made.send(sender=ExportRun, version=version, run=run)
            os.rename(temporary, target)
            renamed = True
            writing.fsync(target.parent)
    except BaseException:
        if renamed:
            shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    run.refresh_from_db()
    return version
