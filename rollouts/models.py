from django.conf import settings
from django.db import models
from django.utils import timezone

from feedback.models import FeedbackItem, Source


class SourceRolloutSettings(models.Model):
    """What an admin set for one source's rollouts: the hosts its agents may reach."""

    source = models.OneToOneField(Source, on_delete=models.CASCADE, related_name="rollout_settings")
    # Host names ("pypi.org"); a host also allows its subdomains. Local hosts are always allowed.
    allowed_hosts = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"rollout settings of {self.source}"


class CustomCheck(models.Model):
    """A source's own check: a pattern over tool name and arguments. Checked when saved (rollouts.services)."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="custom_checks")
    name = models.SlugField(max_length=50)
    explanation = models.CharField(max_length=200)
    tool_pattern = models.CharField(max_length=500, blank=True, default="")
    arguments_pattern = models.CharField(max_length=1000, blank=True, default="")
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["source_id", "name"]
        constraints = [models.UniqueConstraint(fields=["source", "name"], name="custom_check_unique_source_name")]

    def __str__(self) -> str:
        return f"custom:{self.name} ({self.source})"

    @property
    def check_name(self) -> str:
        return f"custom:{self.name}"


class CheckedRollout(models.Model):
    """An item the checks have read: how many tool calls it had, under which version of the checks.

    The comparison's denominator: a side's rollouts are its checked items with at least one call.
    """

    item = models.OneToOneField(FeedbackItem, on_delete=models.CASCADE, related_name="checked_rollout")
    calls = models.PositiveIntegerField(default=0)
    checks_version = models.PositiveSmallIntegerField(default=1)
    checked_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["calls"], name="checked_rollout_calls")]


class RolloutFlag(models.Model):
    """One check that fired on one tool call of an item. Only the scrubbed call is kept."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        CONFIRMED = "confirmed", "Confirmed"
        DISMISSED = "dismissed", "Dismissed"

    item = models.ForeignKey(FeedbackItem, on_delete=models.CASCADE, related_name="rollout_flags")
    check_name = models.CharField(max_length=60)
    custom_check = models.ForeignKey(CustomCheck, null=True, blank=True, on_delete=models.SET_NULL, related_name="flags")
    # Where the call is in the context: "tool_calls.3" or "messages.2.tool_calls.0".
    location = models.CharField(max_length=60)
    call_index = models.PositiveIntegerField(default=0)
    tool_name = models.CharField(max_length=200, blank=True, default="")
    # The call as a reviewer may see it: scrubbed, what a custom pattern matched masked, bounded.
    shown_call = models.TextField(blank=True, default="")
    evidence = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["item_id", "call_index", "check_name"]
        constraints = [
            models.UniqueConstraint(fields=["item", "check_name", "location"], name="rollout_flag_unique_call_check"),
        ]
        indexes = [models.Index(fields=["check_name", "status"], name="rollout_flag_check_status")]

    def __str__(self) -> str:
        return f"{self.check_name} on #{self.item_id} {self.location}"
