import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from feedback import custom_patterns, services
from feedback.models import ApiToken, FeedbackItem, Source
from feedback.scrubber import scrub, scrub_json
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
    """Feedback items as the reviewer pages show them: scrubbed, and read-only.

    The item's text, context, user ref and raw payload hold whatever the sender
    sent, secrets and personal data included. The admin shows the scrubbed text
    only; the original is one click away on the item page, whose *Reveal
    original* records who looked. Items arrive through ingestion, so nothing
    here adds or edits one (a form would show the originals in its inputs).
    """

    list_display = ["id", "kind", "rating", "preview", "source", "model_version", "variant", "status", "received_at"]
    list_filter = ["kind", "status", "source", "model_version", "variant"]
    list_select_related = ["source"]
    # Ids, and the scrubbed text as embedded: searching the originals would
    # confirm a key or an address prefix by prefix, past the audited reveal.
    search_fields = ["=id", "=external_id", "embed_text"]
    search_help_text = "An item id, an external id, or words of the scrubbed text (items not yet embedded have none)."
    fieldsets = [
        (None, {"fields": ["original", "source", "external_id", "kind", "rating", "severity", "reporter"]}),
        ("Text (scrubbed)", {"fields": ["scrubbed_title", "scrubbed_comment", "scrubbed_expected", "scrubbed_context"]}),
        ("Model", {"fields": ["model_name", "model_version", "variant", "surface"]}),
        ("Times", {"fields": ["occurred_at", "received_at"]}),
        ("Pipeline", {"fields": [
            "status", "attempts", "scrubbed_last_error", "status_changed_at",
            "scrubbed_embed_text", "content_hash", "embed_recipe", "embedding",
        ]}),
    ]
    readonly_fields = [
        "original", "scrubbed_title", "scrubbed_comment", "scrubbed_expected", "scrubbed_context",
        "scrubbed_last_error", "scrubbed_embed_text",
    ]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Preview (scrubbed)")
    def preview(self, item: FeedbackItem) -> str:
        return Truncator(_scrubbed(item.title or item.comment)).chars(80)

    @admin.display(description="Original")
    def original(self, item: FeedbackItem) -> str:
        return format_html(
            'The original text, context, user ref and raw payload are shown only on the <a href="{}">item page</a> '
            "with <em>Reveal original</em>, which records who looked in the item's history.",
            reverse("item_detail", args=[item.id]),
        )

    @admin.display(description="Title")
    def scrubbed_title(self, item: FeedbackItem) -> str:
        return _scrubbed(item.title)

    @admin.display(description="Comment")
    def scrubbed_comment(self, item: FeedbackItem) -> str:
        return _scrubbed(item.comment)

    @admin.display(description="Expected")
    def scrubbed_expected(self, item: FeedbackItem) -> str:
        return _scrubbed(item.expected)

    @admin.display(description="Context")
    def scrubbed_context(self, item: FeedbackItem) -> str:
        if not item.context:
            return ""
        context, _ = scrub_json(item.context, extra_patterns=custom_patterns.all_sources())
        return format_html("<pre>{}</pre>", json.dumps(context, indent=2, ensure_ascii=False))

    @admin.display(description="Last error")
    def scrubbed_last_error(self, item: FeedbackItem) -> str:
        return _scrubbed(item.last_error)  # an error may quote the text it failed on

    @admin.display(description="Embedded text")
    def scrubbed_embed_text(self, item: FeedbackItem) -> str:
        # Scrubbed when embedded; again here for patterns a source added since.
        return _scrubbed(item.embed_text)


def _scrubbed(text: str) -> str:
    return scrub(text, extra_patterns=custom_patterns.all_sources()).text if text else ""

