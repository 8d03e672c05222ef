"""Dataset pages. Thin views: read the request, call one selector or service, render.

Reviewers define datasets, export them and download versions; admins also
set schedules and delete datasets.
"""

from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from pydantic import ValidationError

from core.api import ApiError
from core.roles import admin_required, reviewer_required
from core.storable import first_error
from exports import datasets, diffs, runs, writing
from exports import preview as builder_preview
from exports.api import version_file_response
from exports.forms import DatasetForm, DatasetPreviewForm, DiffForm, ScheduleForm
from exports.holdout import REASONS
from exports.models import Dataset, ExportRun, Mode, Trigger
from exports.preview import builder_choices
from exports.schemas import DatasetFilters, DatasetIn, DatasetPatch, ScheduleIn
from exports.selectors import (
    dataset_latest_run,
    dataset_runs,
    dataset_versions,
    datasets_list,
    filters_described,
    version_get,
)
from feedback import custom_patterns

# Runs listed on a dataset's page; older ones stay in the API.
RECENT_RUNS = 10


def _dataset_or_404(dataset_id: int) -> Dataset:
    return get_object_or_404(Dataset.objects.select_related("periodic_task"), id=dataset_id)


def _form_page(request: HttpRequest, form: DatasetForm, *, dataset: Dataset | None, status: int = 200) -> HttpResponse:
    return render(request, "exports/form.html", {"form": form, "dataset": dataset}, status=status)


def _save(form: DatasetForm, save) -> Dataset | None:
    """Validate the spec and call the service; refusals land on the form's fields."""
    try:
        return save(form.spec())
    except ValidationError as exc:
        message, field = first_error(exc)
        form.add_refusal(field, message)
    except datasets.DatasetRefused as refusal:
        form.add_refusal(refusal.field, refusal.message)
    return None


@reviewer_required
@require_GET
def dataset_list(request: HttpRequest) -> HttpResponse:
    return render(request, "exports/list.html", {"datasets": datasets_list()})


@reviewer_required
@require_http_methods(["GET", "POST"])
def dataset_new(request: HttpRequest) -> HttpResponse:
    form = DatasetForm(request.POST or None, choices=builder_choices())
    if request.method == "POST" and form.is_valid():
        dataset = _save(
            form, lambda spec: datasets.dataset_create(spec=DatasetIn.model_validate(spec), user=request.user)
        )
        if dataset is not None:
            messages.success(request, f"Dataset “{dataset.name}” defined. Export it when you are ready.")
            return redirect("dataset_detail", dataset_id=dataset.id)
    return _form_page(request, form, dataset=None, status=422 if form.errors else 200)


@reviewer_required
@require_http_methods(["GET", "POST"])
def dataset_edit(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = _dataset_or_404(dataset_id)
    form = DatasetForm(
        request.POST or None,
        initial=DatasetForm.initial_for(dataset),
        choices=builder_choices(),
        dataset=dataset,
    )
    if request.method == "POST" and form.is_valid():

        def save(spec: dict) -> Dataset:
            patch = DatasetPatch.model_validate(spec)
            return datasets.dataset_update(dataset=dataset, patch=patch, user=request.user)

        if _save(form, save) is not None:
            messages.success(request, f"Dataset “{dataset.name}” saved. The next export uses the new definition.")
            return redirect("dataset_detail", dataset_id=dataset.id)
    return _form_page(request, form, dataset=dataset, status=422 if form.errors else 200)


def _preview_filters(form: DatasetPreviewForm) -> tuple[DatasetFilters | None, tuple[str, str] | None]:
    """The filters, or the first bad one as (field, message): checked as saving checks them, form then schema."""
    for name, errors in form.errors.items():
        field = form[name].label if name in form.fields else ""
        return None, (field, errors[0])
    try:
        return DatasetFilters.model_validate(form.filters()), None
    except ValidationError as exc:
        message, field = first_error(exc)
        return None, (field, message)


@reviewer_required
@require_GET
def dataset_preview(request: HttpRequest, dataset_id: int | None = None) -> HttpResponse:
    """The builder's live preview (an htmx partial): how many items match, rows per format, five of the items.

    A filter the dataset could not be saved with shows its error instead of counts (422).
    """
    dataset = _dataset_or_404(dataset_id) if dataset_id is not None else None
    form = DatasetPreviewForm(
        request.GET,
        # A field fixed once a version exists is not sent by the page: it keeps the dataset's value.
        initial=DatasetForm.initial_for(dataset) if dataset else None,
        choices=builder_choices(),
        dataset=dataset,
    )
    filters, refusal = _preview_filters(form)
    if refusal is not None:
        response = render(request, "exports/_preview.html", {"refusal": refusal}, status=422)
    else:
        preview = builder_preview.dataset_preview(
            filters=filters,
            purpose=form.cleaned_data["purpose"],
            formats=form.cleaned_data["formats"],
            extra_patterns=custom_patterns.all_sources(),
        )
        response = render(request, "exports/_preview.html", {"preview": preview})
    response["Cache-Control"] = "no-store"
    return response


def _run_context(run: ExportRun | None) -> dict:
    return {
        "run": run,
        "active": run is not None and run.is_active,
        "percent": round((run.progress if run else 0) * 100),
    }


def _detail_page(request: HttpRequest, dataset: Dataset, *, status: int = 200, schedule_form=None) -> HttpResponse:
    versions = list(dataset_versions(dataset=dataset))
    numbers = sorted(v.number for v in versions)
    diff_initial = {"old": numbers[-2], "new": numbers[-1]} if len(numbers) >= 2 else None
    context = {
        "dataset": dataset,
        "versions": versions,
        "filters": filters_described(filters=dataset.filters),
        "schedule_form": schedule_form
        or ScheduleForm(initial={"cron": dataset.schedule_cron, "mode": dataset.schedule_mode}),
        "diff_form": DiffForm(initial=diff_initial, numbers=numbers) if diff_initial else None,
        "reasons": REASONS,
        "runs": dataset_runs(dataset=dataset)[:RECENT_RUNS],
        **_run_context(dataset_latest_run(dataset=dataset)),
    }
    return render(request, "exports/detail.html", context, status=status)


@reviewer_required
@require_GET
def dataset_detail(request: HttpRequest, dataset_id: int) -> HttpResponse:
    return _detail_page(request, _dataset_or_404(dataset_id))


@reviewer_required
@require_POST
def dataset_export(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """Export now: a run queued for the worker; the page follows its progress."""
    dataset = _dataset_or_404(dataset_id)
    mode = Mode.INCREMENTAL if request.POST.get("mode") == Mode.INCREMENTAL else Mode.SNAPSHOT
    force = request.POST.get("force") == "on"
    try:
        runs.export_run_start(
            dataset=dataset, trigger=Trigger.REVIEWER, user=request.user, mode=mode, force=force
        )
    except runs.ExportAlreadyRunning as running:
        messages.error(
            request,
            f"An export of “{dataset.name}” is already {running.run.get_status_display().lower()}; "
            "this one was not started.",
        )
        return _detail_page(request, dataset, status=409)
    return redirect(reverse("dataset_detail", args=[dataset.id]) + "#export-status")


@reviewer_required
@require_GET
def run_status(request: HttpRequest, dataset_id: int, run_id: int) -> HttpResponse:
    """The polled status row; it stops asking once the run has finished.

    The poll that sees a new version reloads the page (htmx's HX-Refresh), so
    the versions table and the compare form show it too.
    """
    run = get_object_or_404(
        ExportRun.objects.select_related("dataset", "version", "matched_version"), id=run_id, dataset_id=dataset_id
    )
    response = render(request, "exports/_run_status.html", {"dataset": run.dataset, **_run_context(run)})
    response["Cache-Control"] = "no-store"
    if request.headers.get("HX-Request") and run.status in (ExportRun.Status.DONE, ExportRun.Status.UNCHANGED):
        response["HX-Refresh"] = "true"
    return response


@admin_required
@require_POST
def dataset_schedule(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = _dataset_or_404(dataset_id)
    form = ScheduleForm(request.POST)
    if form.is_valid():
        try:
            datasets.dataset_schedule_set(
                dataset=dataset,
                schedule=ScheduleIn(cron=form.cleaned_data["cron"], mode=form.cleaned_data["mode"]),
                user=request.user,
            )
        except datasets.DatasetRefused as refusal:
            form.add_error("cron", refusal.message)
        else:
            cron = dataset.schedule_cron
            messages.success(
                request,
                f"Scheduled: {cron} (UTC), {dataset.get_schedule_mode_display().lower()}."
                if cron
                else "Schedule removed.",
            )
            return redirect("dataset_detail", dataset_id=dataset.id)
    return _detail_page(request, dataset, status=422, schedule_form=form)


@admin_required
@require_POST
def dataset_delete(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = _dataset_or_404(dataset_id)
    name = dataset.name
    try:
        datasets.dataset_delete(dataset=dataset, user=request.user)
    except datasets.DatasetRefused as refusal:
        messages.error(request, refusal.message)
        return _detail_page(request, dataset, status=refusal.status)
    messages.success(request, f"Deleted the dataset “{name}” with its versions and files.")
    return redirect("dataset_list")


def _version_or_404(dataset: Dataset, number: int):
    version = version_get(dataset=dataset, number=number)
    if version is None:
        raise Http404(f"{dataset.name} has no version {number}")
    return version


@reviewer_required
@require_GET
def version_detail(request: HttpRequest, dataset_id: int, number: int) -> HttpResponse:
    dataset = _dataset_or_404(dataset_id)
    version = _version_or_404(dataset, number)
    held = [
        (reason, count, REASONS.get(reason, reason)) for reason, count in version.held_out.get("reasons", {}).items()
    ]
    checked = [f"{count} {key.replace('_', ' ')}" for key, count in version.held_out.get("checked_against", {}).items()]
    context = {
        "dataset": dataset,
        "version": version,
        "held": held,
        "checked": checked,
        "counts": version.counts,
        "folder": writing.version_folder(version=version),
    }
    return render(request, "exports/version.html", context)


@reviewer_required
@require_GET
def version_file(request: HttpRequest, dataset_id: int, number: int, name: str) -> FileResponse:
    version = _version_or_404(_dataset_or_404(dataset_id), number)
    try:
        return version_file_response(version, name)
    except ApiError as missing:
        raise Http404(missing.message) from None


@reviewer_required
@require_GET
def version_diff(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = _dataset_or_404(dataset_id)
    numbers = sorted(dataset.versions.values_list("number", flat=True))
    form = DiffForm(request.GET, numbers=numbers)
    if not form.is_valid():
        messages.error(request, format_html("Choose two versions of {} to compare.", dataset.name))
        return _detail_page(request, dataset, status=422)
    diff = diffs.version_diff(
        old=_version_or_404(dataset, form.cleaned_data["old"]), new=_version_or_404(dataset, form.cleaned_data["new"])
    )
    return render(request, "exports/diff.html", {"dataset": dataset, "diff": diff, "form": form})
