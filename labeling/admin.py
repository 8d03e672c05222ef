from django.contrib import admin

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


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["item", "category", "confidence", "assigned_by", "updated_at"]
    list_filter = ["assigned_by"]
    raw_id_fields = ["item", "category", "reviewer", "run"]
