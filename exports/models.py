"""Datasets, their export runs and the immutable numbered versions they make.

A `Dataset` is a named curation: filters over the feedback items, a purpose
(train or eval), the formats to write and optionally a schedule. Each
successful `ExportRun` makes one `DatasetVersion`, written under
`EXPORT_ROOT/<dataset>/v<N>/`, whose member items are recorded row by row in
`DatasetVersionItem` so versions can be diffed and eval items held out of
every later train export.
"""

from django.conf import settings
from django.db import models
from django.utils import timezone

from core.jobs import JobRun
from feedback.models import FeedbackItem


class Purpose(models.TextChoices):
    TRAIN = "train", "Training"
    EVAL = "eval", "Held-out evaluation"


class Mode(models.TextChoices):
    SNAPSHOT = "snapshot", "Full snapshot"
    INCREMENTAL = "incremental", "Incremental (new items only)"


class Trigger(models.TextChoices):
    REVIEWER = "reviewer", "Reviewer"
    API = "api", "API"
    COMMAND = "command", "Command"
    SCHEDULE = "schedule", "Schedule"
    DEMO = "demo", "Demo load"


class Dataset(models.Model):
    # The name is the folder of the versions, so it is a slug and never
    # changes once a version exists.
    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True, default="")
    purpose = models.CharField(max_length=5, choices=Purpose.choices)
    # Validated by exports.schemas.DatasetFilters; stored in its JSON form.
    filters = models.JSONField(default=dict, blank=True)
    formats = models.JSONField(default=list)
    schedule_cron = models.CharField(max_length=100, blank=True, default="")
    schedule_mode = models.CharField(max_length=12, choices=Mode.choices, default=Mode.SNAPSHOT)
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ExportRun(JobRun):
    """One export job and its progress.

    A run that succeeds makes a version, unless its data would equal the
    latest version's: then it ends "unchanged" and names the version it matched.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        UNCHANGED = "unchanged", "Unchanged"
        FAILED = "failed", "Failed"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # True while queued or running, NULL after: NULLs never collide in a
    # unique constraint, so the database refuses a second active run of the
    # same dataset however the two were started.
    active = models.BooleanField(null=True, default=True)
    mode = models.CharField(max_length=12, choices=Mode.choices, default=Mode.SNAPSHOT)
    # Make a version even when the data equals the latest version's.
    force = models.BooleanField(default=False)
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Who asked, as the manifest will say: "rita", "schedule 0 3 * * *", "api token fbk_abc… (product)".
    made_by = models.CharField(max_length=200, blank=True, default="")
    processed = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(null=True, blank=True)
    # Who works on it: a run whose process is gone is failed by the next start.
    host = models.CharField(max_length=255, blank=True, default="")
    pid = models.PositiveIntegerField(null=True, blank=True)
    version = models.OneToOneField(
        "DatasetVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="run"
    )
    # An unchanged run: the existing version whose data it equalled.
    matched_version = models.ForeignKey(
        "DatasetVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "active"], name="export_run_one_active_per_dataset"),
        ]

    def __str__(self) -> str:
        return f"Export run {self.id} of {self.dataset_id} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)


class DatasetVersion(models.Model):
    """An immutable numbered snapshot: what was written, from what, by whom."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    # Copied from the dataset when made: later edits of the dataset must not
    # change what an old version promised (an eval version stays held out).
    purpose = models.CharField(max_length=5, choices=Purpose.choices)
    mode = models.CharField(max_length=12, choices=Mode.choices, default=Mode.SNAPSHOT)
    base_number = models.PositiveIntegerField(null=True, blank=True, help_text="Incremental: the version before.")
    filters = models.JSONField(default=dict)
    formats = models.JSONField(default=list)
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # "rita", "schedule: export dataset 3", "command": as written in the manifest.
    made_by = models.CharField(max_length=200)
    app_version = models.CharField(max_length=100, blank=True, default="")
    # The timestamp inside the files; a rewrite of this version reuses it.
    created_at = models.DateTimeField()
    item_count = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict)
    held_out = models.JSONField(default=dict)
    # [{"name", "bytes", "sha256"}] for every file but manifest.json.
    files = models.JSONField(default=list)
    manifest = models.JSONField(default=dict)
    manifest_sha256 = models.CharField(max_length=64)
    # The members carry what each item looked like when exported (see
    # DatasetVersionItem); versions made before that was recorded do not.
    members_recorded = models.BooleanField(default=False)

    class Meta:
        ordering = ["dataset", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "number"], name="dataset_version_unique_number"),
        ]
        indexes = [models.Index(fields=["purpose"], name="dataset_version_purpose")]

    def __str__(self) -> str:
        return f"{self.dataset.name} v{self.number}"

    @property
    def label(self) -> str:
        return f"v{self.number}"

    def file_names(self) -> list[str]:
        return [entry["name"] for entry in self.files] + ["manifest.json"]


class DatasetVersionItem(models.Model):
    """One member item of a version.

    The item reference carries no database constraint: a version is a record
    of what was exported, and it stays complete even if an item is deleted later.
    """

    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, related_name="members")
    item = models.ForeignKey(FeedbackItem, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    # The item as exported, so two versions can say what changed: plain ids
    # (a category or area may be deleted later; the diff then says so), and
    # short hashes of the texts (exports.member_states.text_hash; NULL when
    # empty) rather than second copies of them. All NULL in versions whose
    # `members_recorded` is false.
    category_id = models.BigIntegerField(null=True, blank=True)
    area_id = models.BigIntegerField(null=True, blank=True)
    verdict = models.CharField(max_length=12, null=True, blank=True)
    split = models.CharField(max_length=5, null=True, blank=True)
    hint_hash = models.BigIntegerField(null=True, blank=True)
    corrected_response_hash = models.BigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["version", "item"], name="dataset_version_item_unique"),
        ]
