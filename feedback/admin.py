from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from feedback import services
from feedback.models import ApiToken, FeedbackItem, Source
from feedback.signatures import secret_generate


class ScrubPatternsField(forms.CharField):
    """The source's scrub patterns as lines of `name = regex`, easier to edit than JSON."""

    widget = forms.Textarea(attrs={"rows": 6, "cols": 80, "style": "font-family: monospace"})

    def prepare_value(self, value):
        if isinstance(value, list):
            return "\n".join(f"{row['name']} = {row['regex']}" for row in value)
        return value

    def to_python(self, value):
        rows = []
        for number, line in enumerate((value or "").splitlines(), start=1):
            if not line.strip():
                continue
            name, equals, regex = line.partition("=")
            if not equals or not name.strip() or not regex.strip():
                raise ValidationError(f"Line {number}: write it as `name = regex`.")
            rows.append({"name": name.strip(), "regex": regex.strip()})
        return rows


class SourceForm(forms.ModelForm):
    scrub_patterns = ScrubPatternsField(
        required=False,
        help_text="One per line, as <code>name = regex</code>. Each match becomes <code>[CUSTOM:name]</code> in "
        "embedded text, reviewer pages and exports, on top of the built-in rules. Example: "
        "<code>hostname = [a-z0-9-]+\\.corp\\.example\\.com</code>",
    )

    class Meta:
        model = Source
        # Secrets are made by the app and shown once (on adding, on rotating), never edited or shown again.
        exclude = ["signing_secret", "previous_signing_secret"]


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    form = SourceForm
    list_display = ["name", "slug", "kind", "is_active", "trust_weight", "created_at"]
    list_filter = ["kind", "is_active"]
    prepopulated_fields = {"slug": ["name"]}
    actions = ["rotate_secret", "retire_previous_secret", "create_api_token", "create_export_api_token"]

    readonly_fields = ["secrets"]

    @admin.display(description="Signing secrets")
    def secrets(self, source: Source) -> str:
        if not source.pk:
            return "A new secret is made when you save, and shown once."
        rotation = " and a previous one, valid until retired" if source.previous_signing_secret else ""
        return f"Set{rotation}; stored encrypted and never shown again. Use the rotate action for a new one."

    def save_model(self, request, obj, form, change):
        if not change:
            secret = secret_generate()
            obj.signing_secret = secret
        super().save_model(request, obj, form, change)
        if not change:
            self.message_user(request, f"{obj}: signing secret {secret} (shown once)", messages.WARNING)

    @admin.action(description="Rotate the signing secret (the old one stays valid until retired)")
    def rotate_secret(self, request, queryset):
        for source in queryset:
            secret = services.source_rotate_secret(source=source)
            self.message_user(request, f"{source}: new secret {secret} (shown once)", messages.WARNING)

    @admin.action(description="Retire the previous signing secret")
    def retire_previous_secret(self, request, queryset):
        for source in queryset:
            services.source_retire_previous_secret(source=source)
        self.message_user(request, "Previous secrets retired.")

    @admin.action(description="Create an API token for reports")
    def create_api_token(self, request, queryset):
        self._tokens_create(request, queryset, scopes=[ApiToken.Scope.REPORTS])

    @admin.action(description="Create an API token for datasets and comparisons (reads every source's items)")
    def create_export_api_token(self, request, queryset):
        self._tokens_create(request, queryset, scopes=[ApiToken.Scope.DATASETS, ApiToken.Scope.COMPARE])

    def _tokens_create(self, request, queryset, *, scopes: list[str]) -> None:
        for source in queryset:
            _, raw = services.api_token_create(source=source, name=f"admin:{request.user}", scopes=scopes)
            self.message_user(
                request,
                f"{source}: token {raw} for {', '.join(scopes)} (shown once; only its hash is stored)",
                messages.WARNING,
            )


class ApiTokenForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=ApiToken.Scope.choices, widget=forms.CheckboxSelectMultiple, help_text="What the token may do."
    )

    class Meta:
        model = ApiToken
        fields = "__all__"


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    form = ApiTokenForm
    list_display = ["prefix", "name", "source", "scopes", "created_at", "expires_at", "revoked_at", "last_used_at"]
    list_filter = ["source"]
    readonly_fields = ["token_hash", "prefix", "created_at", "last_used_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False  # tokens are made with the Source action, so the raw value is shown once

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for token in queryset.filter(revoked_at__isnull=True):
            services.api_token_revoke(token=token)


@admin.register(FeedbackItem)
class FeedbackItemAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "rating", "source", "model_version", "variant", "status", "received_at"]
    list_filter = ["kind", "status", "source", "model_version", "variant"]
    search_fields = ["external_id", "comment", "title"]
    list_select_related = ["source"]
    readonly_fields = ["receipt_id", "embedding", "raw_payload"]
