from django.contrib import admin

from feedback import custom_patterns
from feedback.scrubber import scrub
from labeling.models import Assignment, Category, ClusterRun


@admin.register(Category)
class CategoryAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "status", "size", "named_by_reviewer", "updated_at"]
    list_filter = ["status"]
    search_fields = ["name", "description"]
    exclude = ["centroid"]


@admin.register(ClusterRun)
class ClusterRunAdmin(admin.ModelAdmin):
    list_display = ["id", "status", "trigger", "progress", "created_at", "finished_at"]
    list_filter = ["status", "trigger"]
    # An error message may quote the feedback text it failed on.
    exclude = ["error"]
    readonly_fields = ["scrubbed_error"]

    @admin.display(description="Error (scrubbed)")
    def scrubbed_error(self, run: ClusterRun) -> str:
        return scrub(run.error, extra_patterns=custom_patterns.all_sources()).text if run.error else ""


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["item", "category", "confidence", "assigned_by", "updated_at"]
    list_filter = ["assigned_by"]
    raw_id_fields = ["item", "category", "reviewer", "run"]
