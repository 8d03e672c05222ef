"""Cluster runs: categories that stay stable, reviewer decisions that survive."""

import uuid

import numpy as np
import pytest
from django.db import IntegrityError
from django.utils import timezone

from feedback.models import Embedding, FeedbackItem
from labeling.clustering.runs import (
    RunAlreadyActive,
    cluster_run_execute,
    cluster_run_start,
    cluster_runs_reset_stuck,
)
from labeling.clustering.services import items_assign
from labeling.models import Assignment, AuditEvent, Category, ClusterRun
from tests.factories import source_make
from tests.factories.clustering import add_items, category_of, run_clustering

pytestmark = pytest.mark.django_db

def test_a_run_finds_the_themes_without_being_told_how_many(centers):
    source, _ = source_make()
    made = add_items(source, centers, 30, seed=1)
    run = run_clustering()
    assert run.counts["clusters"] == 4
    assert run.counts["new"] == 4 and run.progress == 1.0 and run.active is None
    for ids in made.values():
        assert len({category_of(i).id for i in ids}) == 1
    assert FeedbackItem.objects.filter(status=FeedbackItem.Status.ASSIGNED).count() == 120
    category = category_of(made[0][0])
    assert category.status == Category.Status.PROPOSED and category.size == 30
    assert "wrong" in " ".join(category.keywords).lower()
    assert len(category.representative_ids) == 5 and set(category.representative_ids) <= set(made[0])


def test_thumbs_up_signals_are_not_clustered(centers):
    source, _ = source_make()
    add_items(source, centers, 30, seed=1)
    liked = add_items(source, centers, 10, seed=2, themes=[0], rating=1)
    run_clustering()
    assert not Assignment.objects.filter(item_id__in=liked[0]).exists()


def test_a_rerun_writes_its_size_changes_on_the_history_and_keeps_a_name_people_know(centers):
    source, _ = source_make()
    made = add_items(source, centers, 30, seed=1)
    first = run_clustering()
    category = category_of(made[0][0])
    assert not AuditEvent.objects.filter(category=category).exists()  # new categories: nothing changed yet
    Category.objects.filter(id=category.id).update(name="A name the last run gave")
    add_items(source, centers, 10, seed=2, themes=[0])

    second = run_clustering()

    category.refresh_from_db()
    events = {event.action: event.details for event in AuditEvent.objects.filter(category=category)}
    assert f"renamed by cluster run #{second.id}" not in events
    assert category.name == "A name the last run gave"  # its items mostly stayed: the name stays
    assert events[f"resized by cluster run #{second.id}"] == {"items": {"before": 30, "after": 40}}
    assert second.id != first.id and category.size == 40


def test_a_rerun_renames_a_proposed_category_whose_items_mostly_changed_and_records_it(centers):
    source, _ = source_make()
    made = add_items(source, centers, 30, seed=1)
    run_clustering()
    category = category_of(made[0][0])
    Category.objects.filter(id=category.id).update(name="A name the last run gave")
    # Most of its items were elsewhere before this run (as after a change of text recipe).
    Assignment.objects.filter(item_id__in=made[0][:20]).delete()

    second = run_clustering()

    category.refresh_from_db()
    events = {event.action: event.details for event in AuditEvent.objects.filter(category=category)}
    assert events[f"renamed by cluster run #{second.id}"] == {
        "name": {"before": "A name the last run gave", "after": category.name}
    }
    assert category.name != "A name the last run gave"


def test_a_rerun_keeps_ids_reviewer_names_and_statuses(centers):
    source, _ = source_make()
    made = add_items(source, centers, 30, seed=1)
    run_clustering()
    wrong_file = category_of(made[0][0])
    wrong_file.name, wrong_file.description = "Edits the wrong file", "Reviewer's words"
    wrong_file.status, wrong_file.named_by_reviewer = Category.Status.CONFIRMED, True
    wrong_file.save()
    proposed_id = category_of(made[1][0]).id

    add_items(source, centers, 15, seed=3)  # new data arrives
    run = run_clustering()
    assert run.counts["matched"] == 4 and run.counts["new"] == 0
    wrong_file.refresh_from_db()
    assert wrong_file.name == "Edits the wrong file" and wrong_file.description == "Reviewer's words"
    assert wrong_file.status == Category.Status.CONFIRMED
    assert wrong_file.size == 45
    assert category_of(made[1][0]).id == proposed_id
    assert Category.objects.count() == 4


def test_a_rerun_never_changes_an_assignment_a_reviewer_made(centers):
    source, _ = source_make()
    made = add_items(source, centers, 30, seed=1)
    run_clustering()
    moved_item = made[0][0]
    target = category_of(made[2][0])
    Assignment.objects.filter(item_id=moved_item).update(category=target, assigned_by=Assignment.By.REVIEWER)
    run_clustering()
    assignment = Assignment.objects.get(item_id=moved_item)
    assert assignment.category == target and assignment.assigned_by == Assignment.By.REVIEWER


def test_merged_categories_stay_merged_and_their_items_go_to_the_target(centers):
    source, _ = source_make()
    made = add_items(source, centers, 30, seed=1)
    run_clustering()
    absorbed, target = category_of(made[0][0]), category_of(made[1][0])
    absorbed.status, absorbed.merged_into = Category.Status.MERGED, target
    absorbed.save()
    run_clustering()
    absorbed.refresh_from_db()
    assert absorbed.status == Category.Status.MERGED and absorbed.merged_into == target
    assert {category_of(i) for i in made[0]} == {target}
    assert Category.objects.count() == 4


def test_archived_categories_stay_archived_and_collect_nothing(centers):
    source, _ = source_make()
    made = add_items(source, centers, 30, seed=1)
    run_clustering()
    archived = category_of(made[3][0])
    archived.status = Category.Status.ARCHIVED
    archived.save()
    run_clustering()
    archived.refresh_from_db()
    assert archived.status == Category.Status.ARCHIVED
    assert all(category_of(i) is None for i in made[3])
    assert Category.objects.count() == 4


def test_two_runs_cannot_be_active_at_once():
    first = cluster_run_start(trigger=ClusterRun.Trigger.COMMAND, enqueue=False)
    with pytest.raises(RunAlreadyActive) as refused:
        cluster_run_start(trigger=ClusterRun.Trigger.COMMAND, enqueue=False)
    assert refused.value.run == first
    assert ClusterRun.objects.count() == 1


def test_a_run_takes_its_granularity_from_the_cluster_settings(settings):
    default = cluster_run_start(trigger=ClusterRun.Trigger.COMMAND, enqueue=False)
    assert default.params["merge_threshold"] == 0.045 and default.params["min_cluster_size"] == 5
    ClusterRun.objects.update(active=None)

    settings.CLUSTER_MERGE_THRESHOLD = 0.055
    settings.CLUSTER_MERGE_MIN_ITEMS = 4000
    settings.CLUSTER_MIN_CLUSTER_SIZE = 10
    coarse = cluster_run_start(trigger=ClusterRun.Trigger.COMMAND, enqueue=False)

    assert (coarse.params["merge_threshold"], coarse.params["merge_min_items"], coarse.params["min_cluster_size"]) == (
        0.055, 4000, 10
    )
    assert coarse.params["min_similarity"] == default.params["min_similarity"]


def test_the_database_itself_refuses_a_second_active_run():
    ClusterRun.objects.create(trigger=ClusterRun.Trigger.COMMAND)
    with pytest.raises(IntegrityError):
        ClusterRun.objects.create(trigger=ClusterRun.Trigger.SCHEDULE)


def test_a_stuck_run_is_failed_so_a_new_one_can_start():
    stuck = ClusterRun.objects.create(
        trigger=ClusterRun.Trigger.COMMAND, status=ClusterRun.Status.RUNNING,
        heartbeat_at=timezone.now() - timezone.timedelta(hours=1),
    )
    run = cluster_run_start(trigger=ClusterRun.Trigger.COMMAND, enqueue=False)
    stuck.refresh_from_db()
    assert stuck.status == ClusterRun.Status.FAILED and "no progress" in stuck.error
    assert run.active is True


def test_a_run_no_worker_took_is_failed_with_that_reason_and_a_live_one_is_kept(settings):
    settings.CLUSTER_RUN_STUCK_SECONDS = 600
    waited = ClusterRun.objects.create(
        trigger=ClusterRun.Trigger.COMMAND, created_at=timezone.now() - timezone.timedelta(hours=1)
    )
    assert cluster_runs_reset_stuck() == 1
    waited.refresh_from_db()
    assert waited.status == ClusterRun.Status.FAILED and waited.active is None
    assert waited.error == "stopped: no worker picked it up"
    live = ClusterRun.objects.create(
        trigger=ClusterRun.Trigger.COMMAND, status=ClusterRun.Status.RUNNING, heartbeat_at=timezone.now()
    )
    assert cluster_runs_reset_stuck() == 0
    live.refresh_from_db()
    assert live.status == ClusterRun.Status.RUNNING and live.active is True


def test_a_finished_run_can_be_followed_by_another(centers):
    source, _ = source_make()
    add_items(source, centers, 30, seed=1)
    run_clustering()
    run_clustering()
    assert ClusterRun.objects.filter(status=ClusterRun.Status.DONE).count() == 2


def test_a_run_that_executes_twice_does_the_work_once(centers):
    source, _ = source_make()
    add_items(source, centers, 30, seed=1)
    run = run_clustering()
    assert cluster_run_execute(run_id=run.id) is None


def test_too_few_signals_give_no_categories_and_no_error():
    run = run_clustering()
    assert run.counts["items"] == 0 and run.counts["clusters"] == 0
    assert not Category.objects.exists()


# --- Assignment as signals arrive -------------------------------------------------


def test_new_items_are_assigned_to_the_nearest_category_above_the_threshold(centers, settings):
    source, _ = source_make()
    made = add_items(source, centers, 30, seed=1)
    run_clustering()
    fresh = add_items(source, centers, 3, seed=5, themes=[2])[2]
    far_vector = np.random.default_rng(9).standard_normal(384).astype(np.float32)
    far_vector /= np.linalg.norm(far_vector)
    far = FeedbackItem.objects.create(
        source=source, external_id="far", kind="report", comment="unrelated", occurred_at=timezone.now(),
        receipt_id=uuid.uuid4(), status=FeedbackItem.Status.EMBEDDED,
        embedding=Embedding.objects.create(content_hash="far", model_name="test", vector=far_vector.tobytes()),
    )
    assert items_assign(item_ids=fresh + [far.id]) == 3
    target = category_of(made[2][0])
    for item_id in fresh:
        assignment = Assignment.objects.get(item_id=item_id)
        assert assignment.category == target and assignment.assigned_by == Assignment.By.MODEL
        assert assignment.confidence >= settings.ASSIGN_SIMILARITY_THRESHOLD
    unsorted = Assignment.objects.get(item=far)  # in an area's unsorted bucket, with no category
    assert unsorted.category is None and unsorted.area is not None
    far.refresh_from_db()
    assert far.status == FeedbackItem.Status.EMBEDDED
    target.refresh_from_db()
    assert target.size == 33


def test_raising_the_threshold_leaves_items_unassigned(centers, settings):
    source, _ = source_make()
    add_items(source, centers, 30, seed=1)
    run_clustering()
    fresh = add_items(source, centers, 3, seed=5, themes=[2])[2]
    settings.ASSIGN_SIMILARITY_THRESHOLD = 0.999
    # The lower of the threshold and a category's own loosest members decides.
    assert items_assign(item_ids=fresh) == 3
    Category.objects.update(fit_similarity=0.999)
    Assignment.objects.filter(item_id__in=fresh).delete()
    FeedbackItem.objects.filter(id__in=fresh).update(status=FeedbackItem.Status.EMBEDDED)
    assert items_assign(item_ids=fresh) == 0
    assert not Assignment.objects.filter(item_id__in=fresh).exclude(category=None).exists()


def test_items_are_not_assigned_to_archived_or_merged_categories(centers):
    source, _ = source_make()
    made = add_items(source, centers, 30, seed=1)
    run_clustering()
    Category.objects.filter(id=category_of(made[2][0]).id).update(status=Category.Status.ARCHIVED)
    fresh = add_items(source, centers, 3, seed=5, themes=[2])[2]
    items_assign(item_ids=fresh)
    assert all(category_of(i) is None or category_of(i).status != Category.Status.ARCHIVED for i in fresh)
