"""The demo's rollouts: deterministic, hacks at per-version rates, and the checks find them once loaded by
rollouts_demo_load or by demo_load (sorted into the categories after its cluster run with --process)."""

import io
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from demo import corpus as demo_corpus
from demo.management.commands.demo_load import DEFAULT_ROLLOUTS
from feedback.models import FeedbackItem
from labeling.clustering.services import failure_signals
from labeling.compare.params import compare_params_parse
from labeling.models import Assignment, Category, ClusterRun
from rollouts.compare import check_rows
from rollouts.models import CheckedRollout, RolloutFlag, SourceRolloutSettings

ANCHOR = datetime(2026, 12, 1, tzinfo=UTC)
# demo_load --process exports the demo datasets: into a folder of the test's own.


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


# --- demo_load stores them too ------------------------------------------------------------


def demo_load(**options) -> list[str]:
    out = io.StringIO()
    call_command("demo_load", stdout=out, **options)
    return out.getvalue().splitlines()


@pytest.mark.django_db
def test_demo_load_stores_and_checks_the_demo_rollouts_beside_the_corpus():
    lines = demo_load(count=50)
    assert lines[0].startswith("demo_load: 50 signals (seed 7), 50 new")
    assert lines[1].startswith(f"demo_load: {DEFAULT_ROLLOUTS} rollouts (seed 7), {DEFAULT_ROLLOUTS} new, ")
    rollouts = FeedbackItem.objects.filter(external_id__startswith="demo-rollout-")
    assert rollouts.count() == DEFAULT_ROLLOUTS and FeedbackItem.objects.count() == 50 + DEFAULT_ROLLOUTS
    assert CheckedRollout.objects.filter(item__in=rollouts, calls__gt=0).count() == DEFAULT_ROLLOUTS
    planted = {r.external_id: r.hacks for r in demo_corpus.generate_rollouts(count=DEFAULT_ROLLOUTS, seed=7, anchor=ANCHOR)}
    flagged = set(RolloutFlag.objects.values_list("item__external_id", "check_name"))
    assert flagged and all(check in planted[external_id] for external_id, check in flagged)
    # Without --process they wait for the worker, like the corpus.
    assert set(rollouts.values_list("status", flat=True)) == {FeedbackItem.Status.RECEIVED}


@pytest.mark.django_db
def test_demo_load_and_rollouts_demo_load_load_the_same_rollouts():
    demo_load(count=20, rollouts=150)
    out = io.StringIO()
    call_command("rollouts_demo_load", "--count", "200", stdout=out)
    assert "200 rollouts (seed 7), 50 new" in out.getvalue()
    assert CheckedRollout.objects.count() == 200


@pytest.mark.django_db
def test_demo_load_with_rollouts_0_loads_none_and_if_empty_loads_nothing_at_all():
    assert len(demo_load(count=20, rollouts=0)) == 1
    assert not FeedbackItem.objects.filter(external_id__startswith="demo-rollout-").exists()
    assert "nothing loaded (--if-empty)" in demo_load(count=20, rollouts=100, if_empty=True)[0]
    assert FeedbackItem.objects.count() == 20 and not CheckedRollout.objects.exists()
    with pytest.raises(CommandError, match="--rollouts must be 0 or more"):
        demo_load(count=20, rollouts=-1)


@pytest.mark.django_db
def test_with_process_the_rollouts_are_sorted_into_the_categories_the_run_made_without_it(export_root):
    lines = demo_load(count=300, rollouts=150, process=True)
    run = ClusterRun.objects.get()
    rollouts = FeedbackItem.objects.filter(external_id__startswith="demo-rollout-")
    # The run clustered the corpus's failure signals only: the rollouts came after it.
    corpus_failures = failure_signals().exclude(id__in=rollouts).count()
    assert run.counts["items"] == corpus_failures
    assert Category.objects.exclude(created_by_run=run).count() == 0
    # Embedded, checked, and each failing one filed like any new signal: a category of the run, or its area's unsorted.
    assert FeedbackItem.Status.RECEIVED not in set(rollouts.values_list("status", flat=True))
    assert CheckedRollout.objects.filter(item__in=rollouts).count() == 150
    failing = failure_signals().filter(id__in=rollouts)
    assert failing.exists() and Assignment.objects.filter(item__in=failing).count() == failing.count()
    placed = Assignment.objects.filter(item__in=failing, category__isnull=False).count()
    assert any(line.startswith("demo_load: 150 rollouts (seed 7), 150 new") for line in lines)
    assert f"demo_load: embedded 150 rollouts, {placed} sorted into categories" in "\n".join(lines)
    # The exports still come last (tests/demo/test_export_demo.py reads the last two lines).
    assert lines[-1].startswith("demo_load: dataset coder-sft-train (train) v1: ")


@pytest.mark.django_db
def test_with_the_default_rollouts_the_comparison_flags_22s_rise_in_reading_history():
    demo_load(count=50)
    today = timezone.localdate()
    params = compare_params_parse(a="2.1", b="2.2", date_from=str(today - timedelta(days=31)), date_to=str(today))
    row = {row.check_name: row for row in check_rows(params=params)}["vcs_history"]
    assert row.tested and row.regression and row.down_b > 5 * max(row.down_a, 1)
