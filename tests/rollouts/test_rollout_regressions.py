"""Pinned comparisons watch the rollout checks too: the overview shows a check that regressed, and
regressions_check announces it once per episode, like an area or a category."""

from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.compare.saved import pinned_regressions, saved_comparison_create
from notifications import events
from notifications import services as notification_services
from notifications.models import Event, Notification, RegressionWatch
from rollouts import services
from rollouts.models import RolloutFlag
from tests.factories import client_for, user_make
from tests.factories.rollouts import params_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def listening():
    """A destination for regressions: without one nothing is written (deliveries are not under test here)."""
    notification_services.destination_create(
        name="team", kind="slack", url="https://hooks.example.com/services/T0/B0/x", events=[Event.REGRESSION]
    )


@pytest.fixture
def pin(planted_rollouts):
    return saved_comparison_create(params=params_for(planted_rollouts), name="2.2 launch")


def history_flags_of_22():
    return RolloutFlag.objects.filter(item__model_version="2.2", check_name="vcs_history").order_by("id")


def test_a_pinned_comparison_reports_the_check_that_regressed_on_the_overview(pin):
    [status] = pinned_regressions()
    assert [row.check_name for row in status.check_regressions] == ["vcs_history"]
    assert status.regressions == [] and status.area_regressions == [] and status.regressed
    body = client_for(user_make("rita", "reviewer")).get("/").content.decode()
    assert 'id="pinned-comparisons"' in body and "cmp-pin-regressed" in body
    assert "1 significant regression</strong>" in body
    row = body.split('data-check="vcs_history"')[1].split("</li>")[0]
    assert "Reads version-control history" in row and "0.3% → 4.1%" in row and "+3.8 pp" in row


def test_a_planted_rise_is_announced_once_over_two_checks(pin, listening):
    now = timezone.now()
    assert events.regressions_check(now=now) == 1
    assert events.regressions_check(now=now + timedelta(days=1)) == 0
    [notification] = Notification.objects.filter(event=Event.REGRESSION)
    assert notification.dedup_key == f"regression:{pin.id}:check:vcs_history:1"
    assert notification.summary == "2.2 vs 2.1: reads version-control history in 4.1% of rollouts vs 0.3%"
    lines = notification.text.splitlines()
    assert lines[0] == notification.summary
    assert lines[1].startswith("Rollout check “Reads version-control history”: 41 of 1,000 rollouts flagged vs 3 of 1,000 (+3.8 pp")
    assert "/search/?flag=vcs_history&model_version=2.2" in lines[2]
    assert lines[3].startswith("Pinned comparison “2.2 launch”: ") and "/compare/?a=2.1&b=2.2" in lines[3]
    payload = notification.payload
    assert payload["level"] == "check" and payload["target"] == {
        "id": "vcs_history", "name": "Reads version-control history", "kind": "reward hacking",
    }
    assert (payload["rollouts_a"], payload["rollouts_b"], payload["flagged_a"], payload["flagged_b"]) == (1000, 1000, 3, 41)
    watch = RegressionWatch.objects.get()
    assert (watch.level, watch.target_id, watch.target_key, watch.active, watch.episode) == (
        "check", 0, "vcs_history", True, 1,
    )


def test_dismissed_flags_stop_counting_so_nothing_is_announced(pin, listening):
    reviewer = user_make("rita", "reviewer")
    for flag in history_flags_of_22()[:40]:
        services.flag_decide(flag_id=flag.id, reviewer=reviewer, decision=RolloutFlag.Status.DISMISSED)
    [status] = pinned_regressions()
    row = {row.check_name: row for row in status.comparison.checks}["vcs_history"]
    assert row.down_b == 1 and status.check_regressions == [] and not status.regressed
    assert events.regressions_check() == 0
    assert not Notification.objects.exists() and not RegressionWatch.objects.exists()


def test_a_check_dismissed_for_the_quiet_period_then_confirmed_again_is_a_new_episode(pin, listening, settings):
    settings.NOTIFY_REGRESSION_QUIET_DAYS = 7
    reviewer = user_make("rita", "reviewer")
    now = timezone.now()
    assert events.regressions_check(now=now) == 1
    flags = list(history_flags_of_22()[:40])
    for flag in flags:
        services.flag_decide(flag_id=flag.id, reviewer=reviewer, decision=RolloutFlag.Status.DISMISSED)
    # No longer flagged: the episode stays open through the quiet period, then closes.
    assert events.regressions_check(now=now + timedelta(days=3)) == 0
    assert RegressionWatch.objects.get().active
    assert events.regressions_check(now=now + timedelta(days=8)) == 0
    assert not RegressionWatch.objects.get().active
    # The reviewer changes their mind: the rise stands again, and is news again, once.
    for flag in flags:
        services.flag_decide(flag_id=flag.id, reviewer=reviewer, decision=RolloutFlag.Status.CONFIRMED)
    assert events.regressions_check(now=now + timedelta(days=9)) == 1
    assert events.regressions_check(now=now + timedelta(days=10)) == 0
    keys = sorted(Notification.objects.values_list("dedup_key", flat=True))
    assert keys == [f"regression:{pin.id}:check:vcs_history:1", f"regression:{pin.id}:check:vcs_history:2"]
