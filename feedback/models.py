from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from feedback.encryption import EncryptedSecretField
from feedback.text import EMBED_RECIPE


class Source(models.Model):
    """Who sends signals: a product backend, the dogfooding form, a file import."""

    class Kind(models.TextChoices):
        PRODUCT = "product", "Product backend (webhooks)"
        DOGFOOD = "dogfood", "Dogfooding reports"
        IMPORT = "import", "File import"

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True, help_text="Part of the webhook URL.")
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.PRODUCT)
    # Standard Webhooks secrets (whsec_<base64>). The previous secret stays
    # valid after a rotation until it is retired, so senders can switch over.
    # Stored encrypted (feedback/encryption.py): verifying needs the secret itself, so no hash.
    signing_secret = EncryptedSecretField(max_length=400)
    previous_signing_secret = EncryptedSecretField(max_length=400, blank=True, default="")
    trust_weight = models.FloatField(default=1.0)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Extra scrub rules for what this source knows is private (internal host
    # names, customer ids): [{"name": "hostname", "regex": "..."}], each match
    # replaced by [CUSTOM:<name>] in every source's signals (feedback/custom_patterns.py).
    # Set in the admin, which checks them.
    scrub_patterns = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def custom_scrub_patterns(self) -> tuple[tuple[str, str], ...]:
        """The source's scrub patterns as the (name, regex) pairs the scrubber takes."""
        return tuple((row["name"], row["regex"]) for row in self.scrub_patterns or ())

    def clean(self) -> None:
        super().clean()
        from feedback.scrubber import (
            validate_custom_patterns,  # the scrubber is large; models stay light
        )

        rows = self.scrub_patterns or []
        if not isinstance(rows, list) or not all(
            isinstance(row, dict) and set(row) == {"name", "regex"} for row in rows
        ):
            raise ValidationError({"scrub_patterns": 'Give a list of {"name": ..., "regex": ...} objects.'})
        try:
            slugs = set(Source.objects.values_list("slug", flat=True)) | {self.slug}
            validate_custom_patterns(self.custom_scrub_patterns, data_values=sorted(slugs))
        except ValueError as exc:
            raise ValidationError({"scrub_patterns": str(exc)}) from None


def default_token_scopes() -> list[str]:
    return [ApiToken.Scope.REPORTS]


class ApiToken(models.Model):
    """A bearer token for the API. Only its SHA-256 is stored."""

    class Scope(models.TextChoices):
        # A product backend needs only to file reports; reading every source's
        # data (datasets, comparisons) is granted on purpose, token by token.
        REPORTS = "reports", "File dogfooding reports"
        DATASETS = "datasets", "Define datasets, run exports and download versions (every source's items)"
        COMPARE = "compare", "Read model-version comparisons"
        REVIEW = "review", "Bulk actions on the source's own items (move, pin, queue) and their undo"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, default="")
    token_hash = models.CharField(max_length=64, unique=True)
    # The first characters, so people can tell their tokens apart.
    prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    scopes = models.JSONField(default=default_token_scopes, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.source})"


class Embedding(models.Model):
    """One vector per distinct embedded text and model: equal texts share it."""

    content_hash = models.CharField(max_length=64)
    model_name = models.CharField(max_length=100)
    # float32, L2-normalised, stored as raw bytes (numpy.frombuffer reads it).
    vector = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["content_hash", "model_name"], name="embedding_unique_text_model"),
        ]


class FeedbackItemQuerySet(models.QuerySet):
    def thumbs_up(self):
        return self.filter(rating=FeedbackItem.UP)

    def thumbs_down(self):
        return self.filter(rating=FeedbackItem.DOWN)

    def rated(self, rating: str):
        """By a rating filter's value: "up", "down", "none" (unrated), or anything else for all."""
        if rating == "up":
            return self.thumbs_up()
        if rating == "down":
            return self.thumbs_down()
        if rating == "none":
            return self.filter(rating__isnull=True)
        return self

    def failures(self):
        """What is clustered into failure categories: every report and every thumbs-down."""
        return self.filter(FeedbackItem.FAILURES)


class FeedbackItem(models.Model):
    """One signal: a rating from the product or a dogfooding report."""

    UP, DOWN = 1, -1
    objects = FeedbackItemQuerySet.as_manager()

    class Kind(models.TextChoices):
        RATING = "rating", "Rating"
        REPORT = "report", "Report"

    # Every report and every thumbs-down; the count tables (labeling.counts) share these field names.
    FAILURES = models.Q(kind=Kind.REPORT) | models.Q(rating=DOWN)

    class Status(models.TextChoices):
        RECEIVED = "received", "Received"
        EMBEDDED = "embedded", "Embedded"
        ASSIGNED = "assigned", "Assigned"
        FAILED = "failed", "Failed"

    class Severity(models.TextChoices):
        LOW = "low", "Low"
        MEDIUM = "medium", "Medium"
        HIGH = "high", "High"
        CRITICAL = "critical", "Critical"

    # No index of its own: the unique (source, external_id) index serves every lookup by source.
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="items", db_index=False)
    external_id = models.CharField(max_length=255)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    rating = models.SmallIntegerField(null=True, blank=True, help_text="+1 thumbs-up, -1 thumbs-down")
    title = models.CharField(max_length=300, blank=True, default="")
    comment = models.TextField(blank=True, default="")
    expected = models.TextField(blank=True, default="", help_text="Reports: what should have happened.")
    severity = models.CharField(max_length=10, choices=Severity.choices, blank=True, default="")
    context = models.JSONField(default=dict, blank=True)
    model_name = models.CharField(max_length=100, blank=True, default="")
    model_version = models.CharField(max_length=100, blank=True, default="")
    variant = models.CharField(max_length=100, blank=True, default="")
    surface = models.CharField(max_length=100, blank=True, default="")
    user_ref = models.CharField(max_length=200, blank=True, default="")
    reporter = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="reports",
        db_index=False,  # a partial index below: most items have no reporter
    )
    occurred_at = models.DateTimeField()
    received_at = models.DateTimeField(default=timezone.now)
    raw_payload = models.JSONField(default=dict, help_text="The event as received (see received_payload).")
    # A rating event's context is usually stored exactly as it came; it is
    # then kept once, in `context`, and left out of raw_payload: the second
    # copy was a third of PostgreSQL's work on each inserted row.
    context_as_received = models.BooleanField(
        default=False, help_text="`context` is the event's context as received; raw_payload leaves it out."
    )
    # Marks the rows one request inserted, so it can tell new events from
    # duplicates after a single INSERT ... ON CONFLICT DO NOTHING.
    receipt_id = models.UUIDField(db_index=True)

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RECEIVED)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    status_changed_at = models.DateTimeField(default=timezone.now)
    embed_text = models.TextField(blank=True, default="")
    # Not indexed: nothing looks an item up by it (embeddings are found by their own hash).
    content_hash = models.CharField(max_length=64, blank=True, default="")
    # Which version of feedback.text's recipe made embed_text (rows from
    # before versioning have 1).
    embed_recipe = models.PositiveSmallIntegerField(default=EMBED_RECIPE)
    embedding = models.ForeignKey(
        Embedding, null=True, blank=True, on_delete=models.SET_NULL, related_name="items", db_index=False
    )

    class Meta:
        ordering = ["-received_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["source", "external_id"], name="feedback_item_unique_source_external_id"),
        ]
        indexes = [
            models.Index(fields=["status", "status_changed_at"], name="feedback_item_pipeline"),
            models.Index(fields=["model_version", "occurred_at"], name="feedback_item_version_time"),
            models.Index(fields=["-received_at", "-id"], name="feedback_item_recent"),
            # Search and category pages list newest first: the page is read off the index.
            models.Index(fields=["-occurred_at", "-id"], name="feedback_item_occurred"),
            # The similarity index reads what changed since its last look.
            models.Index(fields=["status_changed_at"], name="feedback_item_changed"),
            # Partial: an item arrives without a reporter (most never get one) and without an
            # embedding, so an insert touches neither index; deleting a user or an embedding
            # still finds its items through them.
            models.Index(fields=["reporter"], name="feedback_item_reporter", condition=models.Q(reporter__isnull=False)),
            models.Index(
                fields=["embedding"], name="feedback_item_embedding", condition=models.Q(embedding__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.external_id}"

    # What received_payload and received_context read: name them all in .only() where items are loaded for them.
    RECEIVED_PAYLOAD_FIELDS = ("raw_payload", "context", "context_as_received")

    @property
    def received_payload(self) -> dict:
        """The event as received: raw_payload, with its context back when it is stored only in `context`."""
        if self.context_as_received:
            return {**self.raw_payload, "context": self.context}
        return self.raw_payload

    @property
    def received_context(self):
        """The event's context as received, without copying the rest of the event (None when it had none)."""
        if self.context_as_received:
            return self.context
        return self.raw_payload.get("context") if isinstance(self.raw_payload, dict) else None


class ImportRun(models.Model):
    """One file of past signals being imported, its progress and its report.

    The file is read in steps (feedback.imports.services): each step claims the
    run for a while, goes on from `records_done` and saves the counts when it
    stops, so a step whose worker died is taken up by the next one without
    storing anything twice (identity is (source, external_id), as for webhooks).
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="import_runs")
    file_name = models.CharField(max_length=255, help_text="The name the file had when it was given.")
    # Where the stored file is read from; emptied once the run ends and the file is removed.
    path = models.CharField(max_length=1000, blank=True, default="")
    format = models.CharField(max_length=20)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    made_by = models.CharField(max_length=200, blank=True, default="")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Progress in the file's own unit: bytes for text files, rows for parquet.
    progress_done = models.BigIntegerField(default=0)
    progress_total = models.BigIntegerField(default=0)
    # Records (lines, rows) read and settled: where the next step goes on from.
    records_done = models.BigIntegerField(default=0)
    stored = models.BigIntegerField(default=0)
    duplicates = models.BigIntegerField(default=0)
    refused = models.BigIntegerField(default=0)
    # Scores or feedback of other names than the ones asked for (Langfuse, LangSmith).
    skipped = models.BigIntegerField(default=0)
    # The first refusals: [{"line", "id", "field", "reason"}], at most REFUSALS_KEPT of them.
    refusals = models.JSONField(default=list, blank=True)
    options = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    claimed_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    REFUSALS_KEPT = 1000

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import #{self.pk} of {self.file_name}"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)

    @property
    def percent(self) -> int:
        if self.status == self.Status.DONE:
            return 100
        if not self.progress_total:
            return 0
        return min(100, int(100 * self.progress_done / self.progress_total))
