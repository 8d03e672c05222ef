from django.contrib import admin

from rollouts.models import CustomCheck, RolloutFlag, SourceRolloutSettings


@admin.register(SourceRolloutSettings)
class SourceRolloutSettingsAdmin(admin.ModelAdmin):
    list_display = ["source", "updated_at"]
    readonly_fields = ["source", "allowed_hosts", "updated_at"]
    # Set on the source's rollout page, which checks every host.
    def has_add_permission(self, request):
        return False


@admin.register(CustomCheck)
class CustomCheckAdmin(admin.ModelAdmin):
    list_display = ["name", "source", "is_active", "created_at"]
    list_filter = ["is_active", "source"]
    # Added on the source's rollout page, which compiles and samples the patterns; here only retired.
    readonly_fields = ["source", "name", "explanation", "tool_pattern", "arguments_pattern", "created_by", "created_at"]

    def has_add_permission(self, request):
        return False


@admin.register(RolloutFlag)
class RolloutFlagAdmin(admin.ModelAdmin):
    list_display = ["check_name", "item", "location", "status", "decided_by"]
    list_filter = ["check_name", "status"]
    # Decided on the item page, which audits it and sets the label's tag.
    readonly_fields = [f.name for f in RolloutFlag._meta.fields]

    def has_add_permission(self, request):
        return False
