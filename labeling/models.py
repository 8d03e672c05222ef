from django.conf import settings
from django.db import models
from django.utils import timezone

from core.jobs import JobRun
from feedback.models import FeedbackItem


class OpenQuerySet(models.QuerySet):
    """Areas and categories a reviewer still works with: not merged away or archived."""

    def open(self):
        return self.filter(status__in=self.model.OPEN_STATUSES)


class ClusterRun(JobRun):
    """One clustering pass: parameters, progress, counts and quality figures."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    class Trigger(models.TextChoices):
        COMMAND = "command", "Command"
        REVIEWER = "reviewer", "Reviewer"
        SCHEDULE = "schedule", "Schedule"

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # True while queued or running, NULL after: a unique column where NULLs do
    # not collide, so the database itself refuses a second active run.
    active = models.BooleanField(null=True, default=True, unique=True)
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    params = models.JSONField(default=dict)
    counts = models.JSONField(default=dict)
    quality = models.JSONField(default=dict)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Run {self.id} ({self.status})"


class Area(models.Model):
    """A group of failure categories ("tests and verification"). Reviewers rename and merge areas."""

    class Status(models.TextChoices):
        PROPOSED = "proposed", "Proposed"
        CONFIRMED = "confirmed", "Confirmed"
        MERGED = "merged", "Merged"

    OPEN_STATUSES = (Status.PROPOSED, Status.CONFIRMED)
    objects = OpenQuerySet.as_manager()

    name = models.CharField(max_length=200)
    keywords = models.JSONField(default=list)
    # float32, L2-normalised, raw bytes: the size-weighted mean of its categories.
    centroid = models.BinaryField(null=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PROPOSED)
    merged_into = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="merged_from")
    named_by_reviewer = models.BooleanField(default=False)
    created_by_run = models.ForeignKey(ClusterRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    last_run = models.ForeignKey(ClusterRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "id"]

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN_STATUSES

    def __str__(self) -> str:
        return self.name


class Category(models.Model):
    """A failure category. Reviewer decisions are never undone by a re-run."""

    class Status(models.TextChoices):
        PROPOSED = "proposed", "Proposed"
        CONFIRMED = "confirmed", "Confirmed"
        MERGED = "merged", "Merged"
        ARCHIVED = "archived", "Archived"

    OPEN_STATUSES = (Status.PROPOSED, Status.CONFIRMED)
    objects = OpenQuerySet.as_manager()

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    keywords = models.JSONField(default=list)
    # Item ids closest to the centroid, best first.
    representative_ids = models.JSONField(default=list)
    # float32, L2-normalised, raw bytes.
    centroid = models.BinaryField(null=True)
    size = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PROPOSED)
    merged_into = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="merged_from")
    # Set when a person named or described it: a re-run then keeps the text.
    named_by_reviewer = models.BooleanField(default=False)
    area = models.ForeignKey(Area, null=True, blank=True, on_delete=models.SET_NULL, related_name="categories")
    # Set when a person moved it to its area: a re-run then keeps it there.
    area_by_reviewer = models.BooleanField(default=False)
    # The cosine its loosest members have to the centroid (5th percentile at
    # the last run): a new signal below min(this, the global threshold) waits unsorted.
    fit_similarity = models.FloatField(null=True, blank=True)
    created_by_run = models.ForeignKey(ClusterRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    last_run = models.ForeignKey(ClusterRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-size", "id"]
        verbose_name_plural = "categories"

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN_STATUSES

    def __str__(self) -> str:
        return self.name


class Assignment(models.Model):
    """Which category an item belongs to, how sure, and who decided."""

    class By(models.TextChoices):
        MODEL = "model", "Model"
        REVIEWER = "reviewer", "Reviewer"

    item = models.OneToOneField(FeedbackItem, on_delete=models.CASCADE, related_name="assignment")
    # No category but an area: the item is in that area's "unsorted" bucket.
    category = models.ForeignKey(Category, null=True, blank=True, on_delete=models.SET_NULL, related_name="assignments")
    area = models.ForeignKey(Area, null=True, blank=True, on_delete=models.SET_NULL, related_name="assignments")
    confidence = models.FloatField(null=True, blank=True, help_text="Cosine similarity to the category centroid.")
    assigned_by = models.CharField(max_length=10, choices=By.choices, default=By.MODEL)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    run = models.ForeignKey(ClusterRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["category", "assigned_by"], name="assignment_category_by"),
            models.Index(fields=["area", "category"], name="assignment_area_category"),
        ]


class Label(models.Model):
    """A reviewer's judgement on one item. With double review an item has two."""

    class Verdict(models.TextChoices):
        FAILURE = "failure", "Confirmed failure"
        NOT_FAILURE = "not_failure", "Not a failure"
        DUPLICATE = "duplicate", "Duplicate"
        SPAM = "spam", "Spam"

    class Split(models.TextChoices):
        TRAIN = "train", "Train"
        EVAL = "eval", "Eval"
        NONE = "none", "None"

    item = models.ForeignKey(FeedbackItem, on_delete=models.CASCADE, related_name="labels")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="labels")
    category = models.ForeignKey(Category, null=True, blank=True, on_delete=models.SET_NULL, related_name="labels")
    verdict = models.CharField(max_length=12, choices=Verdict.choices)
    severity = models.CharField(max_length=10, choices=FeedbackItem.Severity.choices, blank=True, default="")
    tags = models.JSONField(default=list, blank=True)
    hint = models.TextField(blank=True, default="", help_text="What the model should have done.")
    corrected_response = models.TextField(blank=True, default="")
    split = models.CharField(max_length=5, choices=Split.choices, default=Split.NONE)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [models.UniqueConstraint(fields=["item", "reviewer"], name="label_one_per_reviewer")]
        indexes = [models.Index(fields=["verdict", "split"], name="label_verdict_split")]


class Settlement(models.Model):
    """Which judgement is the truth for an item whose reviewers disagree.

    A snapshot of the settled values, so exports write exactly what was
    settled. It holds only while the labels stay as they were when it was
    made (`labels_seen`): a label changed or added since reopens the dispute
    instead of silently moving the truth.
    """

    item = models.OneToOneField(FeedbackItem, on_delete=models.CASCADE, related_name="settlement")
    # The label whose hint, tags, severity, corrected response and split were kept.
    label = models.ForeignKey(Label, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    verdict = models.CharField(max_length=12, choices=Label.Verdict.choices)
    category = models.ForeignKey(Category, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    severity = models.CharField(max_length=10, choices=FeedbackItem.Severity.choices, blank=True, default="")
    tags = models.JSONField(default=list, blank=True)
    hint = models.TextField(blank=True, default="")
    corrected_response = models.TextField(blank=True, default="")
    split = models.CharField(max_length=5, choices=Label.Split.choices, default=Label.Split.NONE)
    # label id (as text) -> its updated_at (ISO) when the dispute was settled.
    labels_seen = models.JSONField(default=dict)
    settled_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    settled_at = models.DateTimeField(default=timezone.now)


class ReviewLock(models.Model):
    """An item handed to one reviewer; others skip it until the lock expires."""

    item = models.OneToOneField(FeedbackItem, on_delete=models.CASCADE, related_name="review_lock")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    expires_at = models.DateTimeField(db_index=True)


class DoubleReview(models.Model):
    """An item an admin picked for a second, independent review."""

    item = models.OneToOneField(FeedbackItem, on_delete=models.CASCADE, related_name="double_review")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)


class AuditEvent(models.Model):
    """Who changed what: every change a person makes, shown where it happened."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=50)
    item = models.ForeignKey(FeedbackItem, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_events")
    # History outlives what it describes: deleting a category keeps its events.
    category = models.ForeignKey(Category, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events")
    area = models.ForeignKey(Area, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events")
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]


class SavedComparison(models.Model):
    """Two sides (a model version, or one variant of it) and a date window.

    Side ``b`` is read as the newer model: a regression is a category whose
    thumbs-down rate is significantly higher on ``b`` than on ``a``.
    """

    name = models.CharField(max_length=200, blank=True, default="")
    a_version = models.CharField(max_length=100)
    a_variant = models.CharField(max_length=100, blank=True, default="")
    b_version = models.CharField(max_length=100)
    b_variant = models.CharField(max_length=100, blank=True, default="")
    # Either a fixed window (date_from/date_to) or a rolling one that always
    # ends today (window_days), so a watched comparison keeps up with new data.
    date_from = models.DateField(null=True, blank=True)
    date_to = models.DateField(null=True, blank=True)
    window_days = models.PositiveIntegerField(null=True, blank=True)
    pinned = models.BooleanField(default=True, help_text="Shown and watched on the overview page.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "labeling"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name or f"{self.a_spec} vs {self.b_spec}"

    @property
    def a_spec(self) -> str:
        return f"{self.a_version}:{self.a_variant}" if self.a_variant else self.a_version

    @property
    def b_spec(self) -> str:
        return f"{self.b_version}:{self.b_variant}" if self.b_variant else self.b_version


class BulkAction(models.Model):
    """One change made to many items at once, and what undoing it needs.

    The audit trail holds one event per bulk action (`audit_event`); the
    values each item had before are kept here, column-wise in `undo`, so the
    history can put them back.
    """

    class Kind(models.TextChoices):
        MOVE = "move", "Moved to a category"
        VERDICT = "verdict", "Set the verdict"
        TAGS_ADD = "tags_add", "Added tags"
        TAGS_REMOVE = "tags_remove", "Removed tags"
        SPLIT = "split", "Set the intended split"
        PIN = "pin", "Pinned to a dataset"
        QUEUE = "queue", "Sent to double review"
        MERGE = "merge", "Merged a category"

    kind = models.CharField(max_length=12, choices=Kind.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # Who, as the history says it: a username, or "api token fbk_abc… (source)".
    made_by = models.CharField(max_length=200, blank=True, default="")
    # Where it was started ("search", "category:12", "area:3", "api"): that page lists it.
    origin = models.CharField(max_length=40, blank=True, default="", db_index=True)
    params = models.JSONField(default=dict, blank=True)
    summary = models.CharField(max_length=300, blank=True, default="")
    item_count = models.PositiveIntegerField(default=0)
    undo = models.JSONField(default=dict, blank=True)
    # The category and area it concerns, so their pages show it.
    category = models.ForeignKey(Category, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    area = models.ForeignKey(Area, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    audit_event = models.OneToOneField(
        AuditEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="bulk_action"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]


class DatasetPin(models.Model):
    """An item pinned to a dataset: the dataset's exports take it whatever its filters say."""

    # A plain id: datasets belong to the exports app, which reads labeling, never the reverse.
    dataset_id = models.BigIntegerField(db_index=True)
    item = models.ForeignKey(FeedbackItem, on_delete=models.CASCADE, related_name="dataset_pins")
    pinned_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    bulk_action = models.ForeignKey(BulkAction, null=True, blank=True, on_delete=models.SET_NULL, related_name="pins")
    pinned_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset_id", "item"], name="dataset_pin_unique")]


class _Counted(models.Model):
    """What the reviewer pages count items by: kind, rating, version, variant, category and area.

    "None" is stored as 0 (rating, category, area) or "" so that one key is
    one row: a unique constraint treats NULLs as distinct. Category and area
    are plain ids: the counts of a deleted one simply drop to zero.
    """

    kind = models.CharField(max_length=10)
    rating = models.SmallIntegerField(default=0)
    model_version = models.CharField(max_length=100, default="")
    variant = models.CharField(max_length=100, default="")
    category_id = models.BigIntegerField(default=0)
    area_id = models.BigIntegerField(default=0)
    n = models.BigIntegerField()

    KEY = ("kind", "rating", "model_version", "variant", "category_id", "area_id")

    class Meta:
        abstract = True


class CountTotal(_Counted):
    """Items per key of all time (see _Counted), folded in from DailyCountChange by labeling.counts."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=_Counted.KEY, name="count_total_unique_key")]
        indexes = [
            models.Index(fields=["category_id"], name="count_total_category"),
            models.Index(fields=["area_id"], name="count_total_area"),
        ]


class DailyCount(_Counted):
    """Items per day (of occurred_at, in UTC) and key, folded in from DailyCountChange by labeling.counts."""

    day = models.DateField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=("day", *_Counted.KEY), name="daily_count_unique_key")]
        indexes = [
            models.Index(fields=["category_id", "day"], name="daily_count_category"),
            models.Index(fields=["day"], name="daily_count_day"),
            # A version's first and last day (labeling.counts.spans).
            models.Index(fields=["model_version", "variant", "day"], name="daily_count_span"),
        ]


class DailyCountChange(_Counted):
    """+1 / -1 per day and key, appended by database triggers on items and assignments (migration labeling 0009).

    Append-only, so concurrent writers never wait on one counter row; readers
    add these to DailyCount and CountTotal until the sweep folds them in.
    """

    day = models.DateField()
