"""Notifications out: where to send them, what was said, and each delivery's fate.

A `Notification` is the outbox row: written in the transaction of the change
it reports, with a unique `dedup_key` so one regression (or one export, one
new category) is announced once however often it is seen. Each subscribed
`Destination` gets a `Delivery`, attempted by a Celery task after commit and
retried with backoff until it succeeds or runs out of attempts.
"""

from django.conf import settings
from django.db import models
from django.utils import timezone

from feedback.encryption import EncryptedSecretField


class Event(models.TextChoices):
    REGRESSION = (
        "comparison.regression",
        "A pinned comparison flags a category, area or rollout check as significantly worse",
    )
    CATEGORY_NEW = "category.new", "A new category passes the size threshold (after a cluster run)"
    EXPORT_VERSION = "export.version_created", "An export makes a new dataset version"
    EXPORT_FAILED = "export.failed", "An export fails"
    PIPELINE_FAILED = "pipeline.items_failed", "Items fail in the pipeline"
    TEST = "test", "A test message (Send test)"


# What a destination may subscribe to: every event but the test message, which goes where it is sent.
SUBSCRIBABLE = [choice for choice in Event.choices if choice[0] != Event.TEST]


class Destination(models.Model):
    class Kind(models.TextChoices):
        WEBHOOK = "webhook", "Standard Webhooks (signed JSON)"
        SLACK = "slack", "Slack-compatible incoming webhook (text)"

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    # Encrypted like the webhook secrets: an incoming-webhook URL is itself a
    # credential (Slack's carries its token in the path), so a database dump
    # must not hand it out. The page shows `url_display` only.
    url = EncryptedSecretField(max_length=4000)
    url_display = models.CharField(max_length=300)
    # whsec_<base64> for Standard Webhooks destinations; shown once, at creation.
    secret = EncryptedSecretField(max_length=400, blank=True, default="")
    events = models.JSONField(default=list)
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name

    def event_labels(self) -> list[str]:
        labels = dict(Event.choices)
        return [labels.get(event, event) for event in self.events]


class Notification(models.Model):
    event = models.CharField(max_length=40, choices=Event.choices)
    # The Standard Webhooks message id: the same for every destination and
    # every retry, so a receiver can drop a redelivery.
    msg_id = models.CharField(max_length=64, unique=True)
    # What makes two notifications the same news ("regression:<pin>:<level>:<id>:<episode>").
    # NULL for messages that are never deduplicated (test messages).
    dedup_key = models.CharField(max_length=255, unique=True, null=True, blank=True)
    summary = models.CharField(max_length=500)
    # The readable message a Slack-compatible destination gets (several lines).
    text = models.TextField()
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.summary


class Delivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SENDING = "sending", "Sending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="deliveries")
    destination = models.ForeignKey(Destination, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    # When the next attempt is due; the sweeper queues pending ones left well past it.
    next_attempt_at = models.DateTimeField(default=timezone.now)
    # A sending row whose lease ran out belongs to a worker that died mid-attempt.
    lease_until = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["notification", "destination"], name="delivery_one_per_destination"),
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due")]


class RegressionWatch(models.Model):
    """One category, area or rollout check a pinned comparison flagged: announced once per episode.

    An episode ends only after the row has gone unflagged for a quiet period,
    so a regression hovering at the significance line is not announced again
    every night it crosses it.
    """

    class Level(models.TextChoices):
        AREA = "area", "Area"
        CATEGORY = "category", "Category"
        CHECK = "check", "Rollout check"

    saved_comparison = models.ForeignKey("labeling.SavedComparison", on_delete=models.CASCADE, related_name="+")
    level = models.CharField(max_length=10, choices=Level.choices)
    # An area's or category's id; 0 for a check, which is named by target_key.
    target_id = models.BigIntegerField()
    # A check's name ("vcs_history", "custom:<name>"): checks have no row id. Empty for areas and categories.
    target_key = models.CharField(max_length=100, blank=True, default="")
    active = models.BooleanField(default=True)
    episode = models.PositiveIntegerField(default=1)
    first_flagged_at = models.DateTimeField(default=timezone.now)
    last_flagged_at = models.DateTimeField(default=timezone.now)
    cleared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["saved_comparison", "level", "target_id", "target_key"], name="regression_watch_one_per_target"
            ),
        ]


class CheckMark(models.Model):
    """How far a periodic check has looked ("pipeline.failed": items failed up to `at` were announced)."""

    name = models.CharField(max_length=50, unique=True)
    at = models.DateTimeField()
