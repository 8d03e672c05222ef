"""Datasets and their schedules: what an export takes, in which formats, and when it runs by itself."""

import json
import shutil
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from exports.models import Dataset
from exports.schemas import FORMATS, DatasetFilters, DatasetIn, DatasetPatch, ScheduleIn
from exports.writing import dataset_folder
from feedback.models import Source
from labeling.audit import audit_record
from labeling.models import Area, Category

SCHEDULED_TASK = "exports.tasks.scheduled_export"


class DatasetRefused(Exception):
    """A dataset change that breaks a rule: a one-line message, the field at fault, the HTTP status."""

    def __init__(self, message: str, *, field: str = "", status: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status


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


def formats_ordered(formats: list[str]) -> list[str]:
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
                formats=formats_ordered(spec.formats),
                created_by=user if user is not None and user.is_authenticated else None,
                created_at=now,
                updated_at=now,
            )
        except IntegrityError:
            raise DatasetRefused(f"a dataset named '{spec.name}' exists already", field="name", status=409) from None
        if spec.schedule is not None:
            dataset_schedule_set(dataset=dataset, schedule=spec.schedule, user=user, audit=False)
        dataset_audit(user, "dataset.create", dataset, {"purpose": dataset.purpose, "filters": dataset.filters})
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
        changes["formats"] = formats_ordered(patch.formats)
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
            dataset_audit(user, "dataset.update", dataset, {"before": before, "after": changes})
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
            dataset_audit(
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
        dataset_audit(user, "dataset.delete", dataset, details)
        dataset.delete()
        transaction.on_commit(lambda: shutil.rmtree(folder, ignore_errors=True))


def dataset_audit(user, action: str, dataset: Dataset, details: dict) -> None:
    actor = user if user is not None and getattr(user, "is_authenticated", False) else None
    audit_record(actor=actor, action=action, details={"dataset": dataset.name, "dataset_id": dataset.id, **details})
