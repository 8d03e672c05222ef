"""Admin pages for imports of past signals: upload a file, follow its run, read its report."""

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import filesizeformat
from django.views.decorators.http import require_GET, require_http_methods

from core.roles import admin_required
from feedback.imports import services as import_services
from feedback.imports.readers import FORMATS, FormatError, format_for
from feedback.models import ImportRun, Source

# An upload is stored on disk, never held in memory, so the limit is about disk and patience.
MAX_UPLOAD_BYTES = 2 * 1024**3
RUNS_LISTED = 50


class ImportForm(forms.Form):
    file = forms.FileField(help_text="JSONL, CSV or parquet; Langfuse and LangSmith exports as JSONL.")
    source = forms.CharField(
        max_length=100,
        help_text="The source the items belong to: an existing one's name, or a new name (made as an import source).",
    )
    format = forms.ChoiceField(
        choices=[("", "From the file name's extension")] + [(name, name) for name in FORMATS],
        required=False,
    )
    names = forms.CharField(
        required=False,
        max_length=1000,
        label="Score names / feedback keys",
        help_text="Langfuse and LangSmith only: the names to take, comma-separated (empty: all of them).",
    )

    def clean_source(self):
        value = self.cleaned_data["source"].strip()
        if "\x00" in value:
            raise forms.ValidationError("The source name must not contain NUL characters.")
        return value

    def clean(self):
        cleaned = super().clean()
        upload = cleaned.get("file")
        if upload is not None:
            try:
                cleaned["format"] = format_for(upload.name, cleaned.get("format") or None)
            except FormatError as exc:
                self.add_error("format", f"{str(exc)[0].upper()}{str(exc)[1:]}.")
        return cleaned

    def name_list(self) -> list[str]:
        return [name.strip() for name in self.cleaned_data.get("names", "").split(",") if name.strip()]


def _page(request: HttpRequest, form: ImportForm, *, status: int = 200) -> HttpResponse:
    context = {
        "form": form,
        "runs": ImportRun.objects.select_related("source")[:RUNS_LISTED],
        "sources": Source.objects.filter(is_active=True).values_list("name", flat=True),
        "max_upload_bytes": MAX_UPLOAD_BYTES,
    }
    return render(request, "feedback/imports.html", context, status=status)


@admin_required
@require_http_methods(["GET", "POST"])
def imports(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _page(request, ImportForm())
    # By now Django has streamed the upload to a temporary file (config.middleware's
    # NUL screen reads every posted form), so memory is safe; this keeps a file over
    # the limit from being stored and imported, and the temporary file goes with the request.
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > MAX_UPLOAD_BYTES:
        messages.error(
            request,
            f"The file is larger than the limit of {filesizeformat(MAX_UPLOAD_BYTES)}; import it with manage.py "
            "import instead.",
        )
        return _page(request, ImportForm(), status=413)
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, form, status=422)
    try:
        run, created = import_services.import_run_from_upload(
            uploaded=form.cleaned_data["file"],
            source_name=form.cleaned_data["source"],
            file_format=form.cleaned_data["format"],
            names=form.name_list(),
            user=request.user,
        )
    except import_services.ImportRefused as refusal:
        form.add_error(refusal.field, f"{refusal.message[0].upper()}{refusal.message[1:]}.")
        return _page(request, form, status=422)
    if created:
        messages.info(request, f"Made the source “{run.source.name}” for these items.")
    return redirect("import_run", run_id=run.id)


def _run_context(run: ImportRun) -> dict:
    return {"run": run, "active": run.is_active, "refusals": run.refusals[:200]}


@admin_required
@require_GET
def import_run(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(ImportRun.objects.select_related("source"), id=run_id)
    return render(request, "feedback/import_run.html", _run_context(run))


@admin_required
@require_GET
def import_run_status(request: HttpRequest, run_id: int) -> HttpResponse:
    """The polled progress block; it stops asking once the run has ended, and re-queues a run left stuck."""
    run = get_object_or_404(ImportRun.objects.select_related("source"), id=run_id)
    import_services.import_run_nudge(run=run)
    response = render(request, "feedback/_import_status.html", _run_context(run))
    response["Cache-Control"] = "no-store"
    return response
