"""labeling.categories.services: reviewer decisions on categories, and that cluster runs keep them."""

import uuid

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from feedback.models import Embedding, FeedbackItem
from labeling.categories import services as category_services
from labeling.clustering.runs import (
    RunAlreadyActive,
    cluster_run_execute,
    cluster_run_start,
)
from labeling.models import Assignment, AuditEvent, Category, ClusterRun, Label
from tests.factories.clustering import add_items, blob_vectors, run_clustering
from tests.factories import source_make

pytestmark = pytest.mark.django_db

Refused = category_services.CategoryRefused


@pytest.fixture
def rita():
    return get_user_model().objects.create_user("rita", password="pw-rita-123")


@pytest.fixture
def source():
    return source_make()[0]


def item_make(source, *, vector=None, rating=-1, comment="it edited the wrong file") -> FeedbackItem:
    embedding = None
    if vector is not None:
        embedding = Embedding.objects.create(
            content_hash=uuid.uuid4().hex, model_name="test", vector=np.asarray(vector, dtype=np.float32).tobytes()
        )
    return FeedbackItem.objects.create(
        source=source, external_id=uuid.uuid4().hex, kind="rating", rating=rating, comment=comment,
        occurred_at=timezone.now(), receipt_id=uuid.uuid4(), embedding=embedding, status=FeedbackItem.Status.ASSIGNED,
    )


def category_make(name, items=(), *, status=Category.Status.PROPOSED, by=Assignment.By.MODEL, **fields) -> Category:
    category = Category.objects.create(name=name, status=status, size=len(items), **fields)
    Assignment.objects.bulk_create([Assignment(item=item, category=category, assigned_by=by) for item in items])
    return category


def snapshot():
    """Everything a category decision could change, to show that a refused one changed nothing."""
    return (
        list(Category.objects.order_by("id").values_list(
            "id", "name", "description", "status", "merged_into", "size", "named_by_reviewer", "centroid"
        )),
        list(Assignment.objects.order_by("id").values_list("item", "category", "assigned_by", "reviewer")),
        AuditEvent.objects.count(),
    )


# --- Rename ------------------------------------------------------------------------


def test_a_rename_sets_the_reviewer_flag_and_records_before_and_after(rita):
    category = category_make("wrong file edit", description="Signals that mention wrong, file.")
    category_services.category_rename(
        category_id=category.id, user=rita, name="  Edits the   wrong file ", description="Changes a file nobody named."
    )
    category.refresh_from_db()
    assert category.name == "Edits the wrong file" and category.description == "Changes a file nobody named."
    assert category.named_by_reviewer is True
    event = AuditEvent.objects.get(category=category)
    assert event.actor == rita and event.action == "renamed"
    assert event.details["name"] == {"before": "wrong file edit", "after": "Edits the wrong file"}
    assert event.details["description"]["before"] == "Signals that mention wrong, file."


@pytest.mark.parametrize("name", ["", "   ", "x" * 201])
def test_a_rename_to_an_empty_or_overlong_name_is_refused_and_changes_nothing(rita, name):
    category = category_make("wrong file edit")
    before = snapshot()
    with pytest.raises(Refused) as refused:
        category_services.category_rename(category_id=category.id, user=rita, name=name, description="new words")
    assert refused.value.field == "name"
    assert snapshot() == before


def test_saving_the_machines_name_unchanged_still_protects_it_from_reruns(rita):
    category = category_make("wrong file edit", description="d")
    category_services.category_rename(category_id=category.id, user=rita, name="wrong file edit", description="d")
    category.refresh_from_db()
    assert category.named_by_reviewer is True
    assert AuditEvent.objects.get(category=category).action == "kept name"
    category_services.category_rename(category_id=category.id, user=rita, name="wrong file edit", description="d")
    assert AuditEvent.objects.filter(category=category).count() == 1


def test_a_cluster_rerun_keeps_a_name_a_reviewer_gave(rita, source, centers):
    made = add_items(source, centers, 30, seed=1)
    run_clustering()
    category = Assignment.objects.get(item_id=made[0][0]).category
    category_services.category_rename(
        category_id=category.id, user=rita, name="Edits the wrong file", description="Reviewer's words"
    )
    untouched = Assignment.objects.get(item_id=made[1][0]).category

    add_items(source, centers, 10, seed=2)
    run = cluster_run_start(trigger=ClusterRun.Trigger.COMMAND, enqueue=False)
    cluster_run_execute(run_id=run.id)

    category.refresh_from_db()
    assert category.name == "Edits the wrong file" and category.description == "Reviewer's words"
    assert category.last_run_id == run.id and category.size == 40
    untouched.refresh_from_db()
    assert untouched.named_by_reviewer is False and untouched.last_run_id == run.id


# --- Confirm and archive --------------------------------------------------------------


def test_confirm_and_archive_change_the_status_and_record_audit_events(rita):
    category = category_make("flaky tests")
    category_services.category_confirm(category_id=category.id, user=rita)
    category.refresh_from_db()
    assert category.status == Category.Status.CONFIRMED
    category_services.category_archive(category_id=category.id, user=rita)
    category.refresh_from_db()
    assert category.status == Category.Status.ARCHIVED
    events = list(AuditEvent.objects.filter(category=category).order_by("id").values_list("action", "details"))
    assert events == [
        ("confirmed", {"status": {"before": "proposed", "after": "confirmed"}}),
        ("archived", {"status": {"before": "confirmed", "after": "archived"}}),
    ]


def test_an_archived_category_can_be_confirmed_again(rita):
    category = category_make("flaky tests", status=Category.Status.ARCHIVED)
    category_services.category_confirm(category_id=category.id, user=rita)
    category.refresh_from_db()
    assert category.status == Category.Status.CONFIRMED


@pytest.mark.parametrize(
    "action, status",
    [
        ("category_confirm", Category.Status.CONFIRMED),
        ("category_confirm", Category.Status.MERGED),
        ("category_archive", Category.Status.ARCHIVED),
        ("category_archive", Category.Status.MERGED),
    ],
)
def test_a_status_change_that_makes_no_sense_is_refused(rita, action, status):
    category = category_make("flaky tests", status=status)
    before = snapshot()
    with pytest.raises(Refused):
        getattr(category_services, action)(category_id=category.id, user=rita)
    assert snapshot() == before


# --- Merge ---------------------------------------------------------------------------


def test_a_merge_moves_every_assignment_and_keeps_who_made_it(rita, source):
    model_items = [item_make(source) for _ in range(3)]
    reviewer_item = item_make(source)
    absorbed = category_make("wrong file", model_items)
    Assignment.objects.create(item=reviewer_item, category=absorbed, assigned_by=Assignment.By.REVIEWER, reviewer=rita)
    target = category_make("edits the wrong file", [item_make(source)], status=Category.Status.CONFIRMED)
    other = category_make("bystander", [item_make(source)])
    label = Label.objects.create(item=model_items[0], reviewer=rita, category=absorbed, verdict="failure")

    result = category_services.category_merge(category_id=absorbed.id, target_id=target.id, user=rita)

    assert result == target
    absorbed.refresh_from_db()
    target.refresh_from_db()
    assert absorbed.status == Category.Status.MERGED and absorbed.merged_into == target
    assert not Assignment.objects.filter(category=absorbed).exists()
    assert Assignment.objects.filter(category=target).count() == 5
    moved = Assignment.objects.get(item=reviewer_item)
    assert moved.category == target and moved.assigned_by == Assignment.By.REVIEWER and moved.reviewer == rita
    assert set(
        Assignment.objects.filter(item__in=model_items).values_list("assigned_by", flat=True)
    ) == {Assignment.By.MODEL}
    assert absorbed.size == 0 and target.size == 5
    assert Assignment.objects.filter(category=other).count() == 1
    label.refresh_from_db()
    assert label.category == target
    actions = set(AuditEvent.objects.values_list("category", "action"))
    assert actions == {(absorbed.id, "merged"), (target.id, "merged")}
    assert AuditEvent.objects.get(category=absorbed).details["items moved"] == 4


def test_categories_merged_earlier_into_the_absorbed_one_point_to_the_target(rita, source):
    target = category_make("target", [item_make(source)])
    middle = category_make("middle", [item_make(source)])
    earlier = category_make("earlier", status=Category.Status.MERGED, merged_into=middle)
    category_services.category_merge(category_id=middle.id, target_id=target.id, user=rita)
    earlier.refresh_from_db()
    assert earlier.merged_into == target


def test_a_category_cannot_be_merged_into_itself(rita, source):
    category = category_make("wrong file", [item_make(source)])
    before = snapshot()
    with pytest.raises(Refused, match="into itself"):
        category_services.category_merge(category_id=category.id, target_id=category.id, user=rita)
    assert snapshot() == before


@pytest.mark.parametrize("target_status", [Category.Status.MERGED, Category.Status.ARCHIVED])
def test_a_merge_into_a_merged_or_archived_category_is_refused(rita, source, target_status):
    category = category_make("wrong file", [item_make(source)])
    target = category_make("gone", status=target_status)
    before = snapshot()
    with pytest.raises(Refused, match="merge into a proposed or confirmed category"):
        category_services.category_merge(category_id=category.id, target_id=target.id, user=rita)
    assert snapshot() == before


def test_a_category_that_was_merged_already_cannot_be_merged_again(rita, source):
    first = category_make("first", [item_make(source)])
    second = category_make("second", [item_make(source)])
    third = category_make("third", [item_make(source)])
    category_services.category_merge(category_id=first.id, target_id=second.id, user=rita)
    before = snapshot()
    with pytest.raises(Refused, match="already been merged"):
        category_services.category_merge(category_id=first.id, target_id=third.id, user=rita)
    assert snapshot() == before


def test_a_merge_into_a_category_that_does_not_exist_is_refused(rita, source):
    category = category_make("wrong file", [item_make(source)])
    before = snapshot()
    with pytest.raises(Refused, match="no longer exists"):
        category_services.category_merge(category_id=category.id, target_id=category.id + 1000, user=rita)
    assert snapshot() == before


def test_a_rerun_after_a_merge_keeps_the_items_in_the_target(rita, source, centers):
    made = add_items(source, centers, 30, seed=1)
    run_clustering()
    absorbed = Assignment.objects.get(item_id=made[0][0]).category
    target = Assignment.objects.get(item_id=made[1][0]).category
    category_services.category_merge(category_id=absorbed.id, target_id=target.id, user=rita)
    run_clustering()
    assert set(Assignment.objects.filter(item_id__in=made[0]).values_list("category", flat=True)) == {target.id}
    target.refresh_from_db()
    assert target.size == 60


# --- Split ---------------------------------------------------------------------------


def test_a_split_moves_exactly_the_chosen_items_into_a_new_confirmed_category(rita, source):
    rng = np.random.default_rng(3)
    center_a, center_b = rng.standard_normal(384), rng.standard_normal(384)
    center_a, center_b = center_a / np.linalg.norm(center_a), center_b / np.linalg.norm(center_b)
    stay = [item_make(source, vector=v) for v in blob_vectors(rng, center_a, 4)]
    leave = [item_make(source, vector=v) for v in blob_vectors(rng, center_b, 3)]
    unembedded = item_make(source)
    old_centroid = np.ones(384, dtype=np.float32) / np.sqrt(384)
    category = category_make(
        "mixed bag", stay + leave + [unembedded], centroid=old_centroid.tobytes(),
        representative_ids=[leave[0].id, stay[0].id],
    )
    chosen = [item.id for item in leave] + [unembedded.id]

    new = category_services.category_split(category_id=category.id, item_ids=chosen, name="Claims success", user=rita)

    assert new.name == "Claims success" and new.status == Category.Status.CONFIRMED and new.named_by_reviewer
    assert set(Assignment.objects.filter(category=new).values_list("item_id", flat=True)) == set(chosen)
    assert set(Assignment.objects.filter(category=category).values_list("item_id", flat=True)) == {i.id for i in stay}
    for assignment in Assignment.objects.filter(category=new):
        assert assignment.assigned_by == Assignment.By.REVIEWER and assignment.reviewer == rita
    expected = np.mean([np.frombuffer(i.embedding.vector, dtype=np.float32) for i in leave], axis=0)
    expected /= np.linalg.norm(expected)
    new_centroid = np.frombuffer(new.centroid, dtype=np.float32)
    assert np.allclose(new_centroid, expected, atol=1e-6)
    assert np.isclose(np.linalg.norm(new_centroid), 1.0)
    assert set(new.representative_ids) == {i.id for i in leave}

    category.refresh_from_db()
    kept = np.mean([np.frombuffer(i.embedding.vector, dtype=np.float32) for i in stay], axis=0)
    assert np.allclose(np.frombuffer(category.centroid, dtype=np.float32), kept / np.linalg.norm(kept), atol=1e-6)
    assert category.representative_ids == [stay[0].id]
    assert category.size == 4 and new.size == 4
    assert category.status == Category.Status.PROPOSED
    assert {e.action for e in AuditEvent.objects.filter(category__in=[category, new])} == {"split"}
    assert AuditEvent.objects.count() == 2


def test_a_rerun_never_moves_split_items_back(rita, source, centers):
    made = add_items(source, centers, 30, seed=1)
    run_clustering()
    category = Assignment.objects.get(item_id=made[0][0]).category
    chosen = made[0][:5]
    new = category_services.category_split(category_id=category.id, item_ids=chosen, name="Split off", user=rita)
    run_clustering()
    assert set(Assignment.objects.filter(item_id__in=chosen).values_list("category", flat=True)) == {new.id}
    new.refresh_from_db()
    assert new.name == "Split off" and new.status == Category.Status.CONFIRMED


@pytest.mark.parametrize(
    "case, message",
    [
        ("no name", "needs a name"),
        ("no items", "Select the items"),
        ("foreign item", "no longer in"),
        ("every item", "leave at least one item"),
    ],
)
def test_a_split_that_cannot_be_done_is_refused_and_changes_nothing(rita, source, case, message):
    items = [item_make(source) for _ in range(3)]
    category = category_make("mixed bag", items)
    elsewhere = category_make("elsewhere", [item_make(source)])
    chosen, name = [items[0].id], "New one"
    if case == "no name":
        name = "  "
    elif case == "no items":
        chosen = []
    elif case == "foreign item":
        chosen.append(elsewhere.assignments.get().item_id)
    elif case == "every item":
        chosen = [i.id for i in items]
    before = snapshot()
    with pytest.raises(Refused, match=message):
        category_services.category_split(category_id=category.id, item_ids=chosen, name=name, user=rita)
    assert snapshot() == before


# --- Delete --------------------------------------------------------------------------


def test_an_empty_category_can_be_deleted_and_the_deletion_is_recorded(rita):
    category = category_make("empty proposal")
    category_services.category_delete(category_id=category.id, user=rita)
    assert not Category.objects.filter(id=category.id).exists()
    event = AuditEvent.objects.get()
    assert event.action == "deleted category" and event.details["category"]["name"] == "empty proposal"


def test_a_category_with_items_cannot_be_deleted(rita, source):
    category = category_make("busy", [item_make(source)])
    before = snapshot()
    with pytest.raises(Refused, match="still has items"):
        category_services.category_delete(category_id=category.id, user=rita)
    assert snapshot() == before


# --- Cluster runs --------------------------------------------------------------------


def test_a_reviewer_starting_a_run_queues_it_and_records_who(rita, django_capture_on_commit_callbacks, monkeypatch):
    queued = []
    monkeypatch.setattr("labeling.tasks.run_clustering.apply_async", lambda args, **kwargs: queued.append(args[0]))
    with django_capture_on_commit_callbacks(execute=True):
        run = category_services.cluster_run_request(user=rita)
    assert run.trigger == ClusterRun.Trigger.REVIEWER and run.started_by == rita
    assert queued == [run.id]
    event = AuditEvent.objects.get()
    assert event.action == "started cluster run" and event.details == {"run": run.id} and event.actor == rita


def test_a_run_that_cannot_be_queued_fails_at_once_and_frees_the_slot(rita, django_capture_on_commit_callbacks, monkeypatch):
    from kombu.exceptions import OperationalError

    def unreachable(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr("labeling.tasks.run_clustering.apply_async", unreachable)
    with django_capture_on_commit_callbacks(execute=True):
        run = category_services.cluster_run_request(user=rita)
    run.refresh_from_db()
    assert run.status == ClusterRun.Status.FAILED and run.active is None and run.finished_at is not None
    assert run.error == "the task queue is unreachable (OperationalError); start the run again later"
    monkeypatch.setattr("labeling.tasks.run_clustering.apply_async", lambda args, **kwargs: None)
    assert category_services.cluster_run_request(user=rita).status == ClusterRun.Status.QUEUED


def test_a_second_run_is_refused_while_one_is_active_and_nothing_is_recorded(rita, monkeypatch):
    monkeypatch.setattr("labeling.tasks.run_clustering.apply_async", lambda args, **kwargs: None)
    first = category_services.cluster_run_request(user=rita)
    with pytest.raises(RunAlreadyActive) as refused:
        category_services.cluster_run_request(user=rita)
    assert refused.value.run == first
    assert ClusterRun.objects.count() == 1 and AuditEvent.objects.count() == 1
