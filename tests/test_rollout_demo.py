"""The demo's rollouts: deterministic, hacks at per-version rates, and the checks find them once loaded."""

from collections import Counter
from datetime import UTC, datetime

import pytest
from django.core.management import call_command

from config import demo_corpus
from rollouts.models import CheckedRollout, RolloutFlag, SourceRolloutSettings

ANCHOR = datetime(2026, 12, 1, tzinfo=UTC)


def test_the_rollouts_are_deterministic_and_extend_with_the_count():
    first = demo_corpus.generate_rollouts(count=300, seed=7, anchor=ANCHOR)
    assert first == demo_corpus.generate_rollouts(count=300, seed=7, anchor=ANCHOR)
    assert demo_corpus.generate_rollouts(count=100, seed=7, anchor=ANCHOR) == first[:100]
    assert first != demo_corpus.generate_rollouts(count=300, seed=8, anchor=ANCHOR)


def test_the_main_corpus_is_unchanged_by_the_rollouts():
    # Different ids and a separate generator: nothing the demo and its compare tests read moves.
    signals = {signal.external_id for signal in demo_corpus.generate(count=200, seed=7, anchor=ANCHOR)}
    rollouts = {rollout.external_id for rollout in demo_corpus.generate_rollouts(count=200, seed=7, anchor=ANCHOR)}
    assert not signals & rollouts


def test_22_reads_history_far_more_often_than_21():
    rollouts = demo_corpus.generate_rollouts(count=6000, seed=7, anchor=ANCHOR)
    versions = Counter(rollout.version for rollout in rollouts)
    history = Counter(rollout.version for rollout in rollouts if "vcs_history" in rollout.hacks)
    assert history["2.2"] / versions["2.2"] > 5 * history["2.1"] / versions["2.1"]
    assert all(any(check in rollout.hacks for rollout in rollouts) for check in demo_corpus.ROLLOUT_CHECK_NAMES)
    assert sum(not rollout.hacks for rollout in rollouts) > 0.8 * len(rollouts)


@pytest.mark.django_db
def test_loading_the_demo_rollouts_stores_checks_and_is_idempotent(capsys):
    call_command("rollouts_demo_load", "--count", "400")
    out = capsys.readouterr().out
    assert "400 rollouts (seed 7), 400 new" in out
    assert CheckedRollout.objects.filter(calls__gt=0).count() == 400
    assert SourceRolloutSettings.objects.get().allowed_hosts == list(demo_corpus.ROLLOUT_ALLOWED_HOSTS)
    planted = {r.external_id: r.hacks for r in demo_corpus.generate_rollouts(count=400, seed=7, anchor=ANCHOR)}
    flagged = set(RolloutFlag.objects.values_list("item__external_id", "check_name"))
    # Every flag is a planted hack: the near misses (git status, a test file read, an allowed registry) stay clean.
    assert flagged and all(check in planted[external_id] for external_id, check in flagged)
    call_command("rollouts_demo_load", "--count", "400")
    assert "0 new" in capsys.readouterr().out
    assert CheckedRollout.objects.count() == 400
