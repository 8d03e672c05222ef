"""Exports in the Django admin: read-only views of runs and versions.

Datasets are edited on /datasets/, where the filters are validated and the
schedule kept in step with celery beat; versions are immutable records.
"""

from django.contrib import admin

from exports.models import Dataset, DatasetVersion, ExportRun
from feedback import custom_patterns
from feedback.scrubber import scrub


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Dataset)
class DatasetAdmin(ReadOnlyAdmin):
    list_display = ["name", "purpose", "schedule_cron", "schedule_mode", "created_at", "updated_at"]
    list_filter = ["purpose"]
    search_fields = ["name", "description"]

    def has_delete_permission(self, request, obj=None) -> bool:
        # Deleting must also remove the schedule and the files: /datasets/<id>/ does that.
        return False


@admin.register(ExportRun)
class ExportRunAdmin(ReadOnlyAdmin):
    list_display = ["id", "dataset", "status", "trigger", "mode", "made_by", "progress", "created_at", "finished_at"]
    list_filter = ["status", "trigger"]
    list_select_related = ["dataset"]
    # An error message may quote the record it failed on.
    exclude = ["error"]
    readonly_fields = ["scrubbed_error"]

    @admin.display(description="Error (scrubbed)")
    def scrubbed_error(self, run: ExportRun) -> str:
        return scrub(run.error, extra_patterns=custom_patterns.all_sources()).text if run.error else ""


@admin.register(DatasetVersion)
class DatasetVersionAdmin(ReadOnlyAdmin):
    list_display = ["dataset", "number", "purpose", "mode", "item_count", "made_by", "created_at"]
    list_filter = ["purpose", "mode"]
    list_select_related = ["dataset"]
    exclude = ["manifest"]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
