"""Dataset API: /api/v1/datasets.

Authenticated with the same bearer tokens as the feedback API, or a logged-in
session with the reviewer role (unsafe methods then need the CSRF token).
Schedules need an admin session: a token is a machine, not a person with a role.
"""

from datetime import datetime
from typing import Any

from django.db import transaction
from django.http import FileResponse, HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, Router, Schema, Status

from core.api import (
    ApiError,
    error_responses,
    json_body_schema,
    read_json_body,
    validate_model,
)
from core.auth import Caller, api_caller
from exports import datasets, runs, writing
from exports.card import manifest_bytes
from exports.models import Dataset, DatasetVersion, ExportRun, Mode, Trigger
from exports.schemas import DatasetIn, DatasetPatch, ExportIn
from exports.selectors import (
    dataset_latest_run,
    dataset_versions,
    datasets_list,
    version_get,
)
from feedback.models import ApiToken

router = Router(tags=["datasets"])


def caller_of(request: HttpRequest) -> Caller:
    return api_caller(request, scope=ApiToken.Scope.DATASETS, what="datasets need")


def _refused(refusal: datasets.DatasetRefused) -> ApiError:
    return ApiError(refusal.status, refusal.message, refusal.field)


class ScheduleOut(Schema):
    cron: str
    mode: str


class RunOut(Schema):
    id: int
    dataset_id: int
    status: str
    mode: str
    trigger: str
    progress: float
    stage: str
    processed: int
    total: int | None
    error: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    version: int | None
    force: bool
    matched_version: int | None = Field(
        description="An unchanged run: the existing version whose data it equalled (no version was made)."
    )


class DatasetOut(Schema):
    id: int
    name: str
    description: str
    purpose: str
    filters: dict[str, Any]
    formats: list[str]
    schedule: ScheduleOut | None
    created_at: datetime
    updated_at: datetime
    latest_version: int | None
    latest_run: RunOut | None


class FileOut(Schema):
    name: str
    format: str | None
    rows: int | None
    bytes: int
    sha256: str | None
    url: str


class VersionOut(Schema):
    dataset_id: int
    number: int
    purpose: str
    mode: str
    base_version: int | None
    item_count: int
    created_at: datetime
    made_by: str
    trigger: str
    app_version: str
    counts: dict[str, Any]
    held_out: dict[str, Any]
    files: list[FileOut]
    manifest_sha256: str


class VersionDetailOut(VersionOut):
    manifest: dict[str, Any]


def run_out(run: ExportRun | None) -> dict | None:
    if run is None:
        return None
    return {
        "id": run.id,
        "dataset_id": run.dataset_id,
        "status": run.status,
        "mode": run.mode,
        "trigger": run.trigger,
        "progress": run.progress,
        "stage": run.stage,
        "processed": run.processed,
        "total": run.total,
        "error": run.error,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "version": run.version.number if run.version_id else None,
        "force": run.force,
        "matched_version": run.matched_version.number if run.matched_version_id else None,
    }


def dataset_out(dataset: Dataset, *, latest_version: DatasetVersion | None, latest_run: ExportRun | None) -> dict:
    return {
        "id": dataset.id,
        "name": dataset.name,
        "description": dataset.description,
        "purpose": dataset.purpose,
        "filters": dataset.filters,
        "formats": dataset.formats,
        "schedule": {"cron": dataset.schedule_cron, "mode": dataset.schedule_mode} if dataset.schedule_cron else None,
        "created_at": dataset.created_at,
        "updated_at": dataset.updated_at,
        "latest_version": latest_version.number if latest_version else None,
        "latest_run": run_out(latest_run),
    }


def _dataset_answer(dataset: Dataset) -> dict:
    return dataset_out(
        dataset,
        latest_version=dataset.versions.order_by("-number").first(),
        latest_run=dataset_latest_run(dataset=dataset),
    )


def version_out(request: HttpRequest, version: DatasetVersion, *, detail: bool = False) -> dict:
    base = f"/api/v1/datasets/{version.dataset_id}/versions/{version.number}/files/"
    files = [
        {"format": None, "rows": None, "sha256": None, **entry, "url": request.build_absolute_uri(base + entry["name"])}
        for entry in version.files
    ]
    manifest_size = len(manifest_bytes(version.manifest))
    files.append(
        {
            "name": "manifest.json",
            "format": "manifest",
            "rows": None,
            "bytes": manifest_size,
            "sha256": version.manifest_sha256,
            "url": request.build_absolute_uri(base + "manifest.json"),
        }
    )
    answer = {
        "dataset_id": version.dataset_id,
        "number": version.number,
        "purpose": version.purpose,
        "mode": version.mode,
        "base_version": version.base_number,
        "item_count": version.item_count,
        "created_at": version.created_at,
        "made_by": version.made_by,
        "trigger": version.trigger,
        "app_version": version.app_version,
        "counts": version.counts,
        "held_out": version.held_out,
        "files": files,
        "manifest_sha256": version.manifest_sha256,
    }
    if detail:
        answer["manifest"] = version.manifest
    return answer


# The errors of a read by id. 422: ninja checks that the ids in the path are
# integers before the view runs, and answers one that is not with 422 naming it.
READ_ERRORS = error_responses(401, 403, 404, 422)


def _dataset_or_404(dataset_id: int) -> Dataset:
    return get_object_or_404(Dataset, id=dataset_id)


def _version_or_404(dataset: Dataset, number: int) -> DatasetVersion:
    version = version_get(dataset=dataset, number=number)
    if version is None:
        raise ApiError(404, f"dataset '{dataset.name}' has no version {number}")
    return version


@router.get("/datasets", response={200: list[DatasetOut], **error_responses(401, 403)}, summary="List datasets")
def list_datasets(request: HttpRequest):
    caller_of(request)
    return [
        dataset_out(dataset, latest_version=dataset.latest_version, latest_run=dataset.latest_run)
        for dataset in datasets_list()
    ]


@router.post(
    "/datasets",
    response={201: DatasetOut, **error_responses(400, 401, 403, 409, 422)},
    openapi_extra=json_body_schema(DatasetIn),
    summary="Define a dataset",
)
def create_dataset(request: HttpRequest):
    """A named curation: purpose, filters, formats and (admins) a cron schedule."""
    caller = caller_of(request)
    spec = validate_model(DatasetIn, read_json_body(request))
    if spec.schedule is not None and not caller.is_admin:
        raise ApiError(403, "setting a schedule needs the admin role", "schedule")
    try:
        dataset = datasets.dataset_create(spec=spec, user=caller.user)
    except datasets.DatasetRefused as refusal:
        raise _refused(refusal) from None
    return Status(201, _dataset_answer(dataset))


@router.get("/datasets/{dataset_id}", response={200: DatasetOut, **READ_ERRORS}, summary="A dataset")
def get_dataset(request: HttpRequest, dataset_id: int):
    caller_of(request)
    return _dataset_answer(_dataset_or_404(dataset_id))


@router.patch(
    "/datasets/{dataset_id}",
    response={200: DatasetOut, **error_responses(400, 401, 403, 404, 409, 422)},
    openapi_extra=json_body_schema(DatasetPatch),
    summary="Change a dataset",
)
def update_dataset(request: HttpRequest, dataset_id: int):
    """Only the fields sent change. The name and purpose are fixed once a version exists."""
    caller = caller_of(request)
    dataset = _dataset_or_404(dataset_id)
    patch = validate_model(DatasetPatch, read_json_body(request))
    if "schedule" in patch.model_fields_set and not caller.is_admin:
        raise ApiError(403, "changing a schedule needs the admin role", "schedule")
    try:
        with transaction.atomic():
            datasets.dataset_update(dataset=dataset, patch=patch, user=caller.user)
    except datasets.DatasetRefused as refusal:
        raise _refused(refusal) from None
    dataset.refresh_from_db()
    return _dataset_answer(dataset)


@router.post(
    "/datasets/{dataset_id}/exports",
    response={202: RunOut, **error_responses(400, 401, 403, 404, 409, 422)},
    openapi_extra=json_body_schema(ExportIn, required=False),
    summary="Export the next version",
)
def start_export(request: HttpRequest, dataset_id: int):
    """Queue an export; 409 while one of this dataset is queued or running. The body is optional."""
    caller = caller_of(request)
    dataset = _dataset_or_404(dataset_id)
    body = validate_model(ExportIn, read_json_body(request)) if request.body.strip() else ExportIn()
    try:
        run = runs.export_run_start(
            dataset=dataset,
            trigger=Trigger.API,
            user=caller.user,
            made_by=caller.made_by,
            mode=Mode(body.mode),
            force=body.force,
        )
    except runs.ExportAlreadyRunning as running:
        raise ApiError(409, str(running)) from None
    return Status(202, run_out(run))


@router.get(
    "/datasets/{dataset_id}/exports/{run_id}",
    response={200: RunOut, **READ_ERRORS},
    summary="An export run's progress",
)
def get_export(request: HttpRequest, dataset_id: int, run_id: int):
    caller_of(request)
    run = ExportRun.objects.select_related("version", "matched_version").filter(dataset_id=dataset_id, id=run_id).first()
    if run is None:
        raise ApiError(404, f"no export run {run_id} of dataset {dataset_id}")
    return run_out(run)


@router.get(
    "/datasets/{dataset_id}/versions",
    response={200: list[VersionOut], **READ_ERRORS},
    summary="A dataset's versions, newest first",
)
def list_versions(request: HttpRequest, dataset_id: int):
    caller_of(request)
    dataset = _dataset_or_404(dataset_id)
    return [version_out(request, version) for version in dataset_versions(dataset=dataset)]


@router.get(
    "/datasets/{dataset_id}/versions/{number}",
    response={200: VersionDetailOut, **READ_ERRORS},
    summary="A version with its manifest",
)
def get_version(request: HttpRequest, dataset_id: int, number: int):
    caller_of(request)
    return version_out(request, _version_or_404(_dataset_or_404(dataset_id), number), detail=True)


# What a version's files are served as, by suffix; the download route documents the same.
FILE_CONTENT_TYPES = {
    ".jsonl": "application/x-ndjson",
    ".csv": "text/csv; charset=utf-8",
    ".md": "text/markdown; charset=utf-8",
    ".json": "application/json",
    ".parquet": "application/vnd.apache.parquet",
}
BINARY = {"type": "string", "format": "binary"}


@router.get(
    "/datasets/{dataset_id}/versions/{number}/files/{name}",
    response={200: None, **READ_ERRORS},
    summary="Download one file of a version",
    openapi_extra={
        "responses": {
            200: {
                "description": "The file, as an attachment: the data files, the card, manifest.json.",
                "content": {
                    # The only JSON file is the manifest, an object; the others are bytes.
                    content_type: {"schema": {"type": "object"} if suffix == ".json" else BINARY}
                    for suffix, content_type in FILE_CONTENT_TYPES.items()
                },
            }
        }
    },
)
def download_file(request: HttpRequest, dataset_id: int, number: int, name: str):
    caller_of(request)
    version = _version_or_404(_dataset_or_404(dataset_id), number)
    return version_file_response(version, name)


def version_file_response(version: DatasetVersion, name: str) -> FileResponse:
    """A file of a version, streamed; only names the version lists (no paths)."""
    if name not in version.file_names():
        raise ApiError(404, f"{version} has no file '{name}'")
    path = writing.version_folder(version=version) / name
    if not path.is_file():
        raise ApiError(
            404,
            f"{name} of {version} is missing on disk; "
            f"`manage.py export {version.dataset.name} --verify {version.number}` writes it again",
        )
    return FileResponse(
        open(path, "rb"),
        as_attachment=True,
        filename=f"{version.dataset.name}-v{version.number}-{name}",
        content_type=FILE_CONTENT_TYPES.get(path.suffix),
    )
