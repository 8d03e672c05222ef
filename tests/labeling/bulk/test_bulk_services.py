"""Bulk actions as services: each one writes what it says, records one audit event, and undoes."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from exports.models import Dataset
from feedback.models import FeedbackItem
from labeling.bulk.selectors import Selection, SelectionRefused
from labeling.bulk.services import (
    BulkParams,
    BulkRefused,
    bulk_apply,
    category_merge_undoable,
)
from labeling.bulk.undo import bulk_undo
from labeling.models import Assignment, AuditEvent, BulkAction, Category, DatasetPin, DoubleReview, Label
from tests.factories.review import category_make, item_make

pytestmark = pytest.mark.django_db


def apply(kind, items, actor, **params):
    return bulk_apply(
        params=BulkParams(kind=kind, **params),
        selection=Selection(ids=tuple(item.id for item in items)),
        actor=actor,
        made_by=actor.get_username() if actor else "api token",
        origin="search",
    )


def state(items):
    """Everything a bulk action may change, per item, to compare before and after."""
    ids = [item.id for item in items]
    return {
        "assignments": sorted(
            Assignment.objects.filter(item_id__in=ids).values_list(
                "item_id", "category_id", "area_id", "assigned_by", "reviewer_id", "confidence", "run_id"
            )
        ),
        "labels": sorted(
            Label.objects.filter(item_id__in=ids).values_list(
                "item_id", "reviewer_id", "verdict", "category_id", "tags", "split", "updated_at"
            )
        ),
        "status": sorted(FeedbackItem.objects.filter(id__in=ids).values_list("id", "status")),
        "pins": sorted(DatasetPin.objects.filter(item_id__in=ids).values_list("dataset_id", "item_id")),
        "double": sorted(DoubleReview.objects.filter(item_id__in=ids).values_list("item_id", flat=True)),
        "sizes": sorted(Category.objects.values_list("id", "size")),
    }


@pytest.fixture
def two_categories(source):
    old = category_make("Edits the wrong file", size=3)
    new = category_make("Claims the tests passed", status=Category.Status.CONFIRMED, size=1)
    items = [item_make(source, category=old, confidence=0.7 + i / 100) for i in range(3)]
    items.append(item_make(source, category=new))
    loose = item_make(source)  # embedded, in no category
    return old, new, items, loose


def test_a_move_puts_every_item_in_the_category_as_a_reviewer_decision_and_undo_restores_it(
    two_categories, reviewer
):
    old, new, items, loose = two_categories
    selected = [*items[:3], loose]
    before = state(selected + [items[3]])

    action = apply("move", selected, reviewer, category_id=new.id)

    assert action.item_count == 4
    rows = Assignment.objects.filter(item__in=selected)
    assert {row.category_id for row in rows} == {new.id}
    assert {row.assigned_by for row in rows} == {Assignment.By.REVIEWER}
    assert {row.reviewer_id for row in rows} == {reviewer.id}
    assert FeedbackItem.objects.get(id=loose.id).status == FeedbackItem.Status.ASSIGNED
    old.refresh_from_db()
    new.refresh_from_db()
    assert (old.size, new.size) == (0, 5)
    events = AuditEvent.objects.filter(action="bulk: moved to a category")
    assert events.count() == 1 and events[0].details["items"] == 4 and events[0].category_id == new.id

    result = bulk_undo(action_id=action.id, user=reviewer, made_by="rita")

    assert (result.restored, result.kept) == (4, 0)
    assert state(selected + [items[3]]) == before
    assert AuditEvent.objects.filter(action="undid bulk action").count() == 1


def test_undo_leaves_an_item_moved_again_since_where_it_is(two_categories, reviewer):
    old, new, items, loose = two_categories
    action = apply("move", items[:3], reviewer, category_id=new.id)
    Assignment.objects.filter(item=items[0]).update(category=old, assigned_by=Assignment.By.REVIEWER)

    result = bulk_undo(action_id=action.id, user=reviewer, made_by="rita")

    assert (result.restored, result.kept) == (2, 1)
    assert Assignment.objects.get(item=items[0]).assigned_by == Assignment.By.REVIEWER
    assert {a.assigned_by for a in Assignment.objects.filter(item__in=items[1:3])} == {Assignment.By.MODEL}
    assert [a.confidence for a in Assignment.objects.filter(item__in=items[1:3]).order_by("item_id")] == [0.71, 0.72]


def test_moving_into_a_merged_category_is_refused_and_changes_nothing(two_categories, reviewer):
    old, new, items, loose = two_categories
    new.status = Category.Status.MERGED
    new.save()
    before = state(items)
    with pytest.raises(BulkRefused) as refused:
        apply("move", items, reviewer, category_id=new.id)
    assert refused.value.status == 409 and "merged" in refused.value.message
    assert state(items) == before
    assert not BulkAction.objects.exists() and not AuditEvent.objects.exists()


def test_a_verdict_writes_the_reviewers_own_label_and_undo_removes_or_restores_it(
    two_categories, reviewer, second_reviewer
):
    old, new, items, loose = two_categories
    theirs = Label.objects.create(item=items[0], reviewer=second_reviewer, verdict="not_failure")
    mine = Label.objects.create(item=items[1], reviewer=reviewer, verdict="spam")
    before = state(items)

    action = apply("verdict", items[:3], reviewer, verdict="failure")

    labels = {label.item_id: label for label in Label.objects.filter(reviewer=reviewer)}
    assert set(labels) == {items[0].id, items[1].id, items[2].id}
    assert {label.verdict for label in labels.values()} == {"failure"}
    # A failure is filed under the item's category.
    assert {label.category_id for label in labels.values()} == {old.id}
    assert Label.objects.get(id=theirs.id).verdict == "not_failure"
    assert action.item_count == 3

    bulk_undo(action_id=action.id, user=reviewer, made_by="rita")
    assert state(items) == before
    assert Label.objects.get(id=mine.id).verdict == "spam"


def test_tags_are_added_and_removed_on_own_labels_and_undo_restores_the_old_lists(two_categories, reviewer):
    old, new, items, loose = two_categories
    for item in items[:2]:
        Label.objects.create(item=item, reviewer=reviewer, verdict="failure", tags=["verbose"])
    before = state(items[:2])

    added = apply("tags_add", items[:2], reviewer, tags=("claimed success falsely", "verbose"))
    assert [label.tags for label in Label.objects.filter(item__in=items[:2])] == [
        ["verbose", "claimed success falsely"]
    ] * 2
    removed = apply("tags_remove", items[:2], reviewer, tags=("verbose",))
    assert [label.tags for label in Label.objects.filter(item__in=items[:2])] == [["claimed success falsely"]] * 2

    bulk_undo(action_id=removed.id, user=reviewer, made_by="rita")
    bulk_undo(action_id=added.id, user=reviewer, made_by="rita")
    assert state(items[:2]) == before


def test_tags_on_items_without_a_label_of_yours_are_refused(two_categories, reviewer):
    old, new, items, loose = two_categories
    Label.objects.create(item=items[0], reviewer=reviewer, verdict="failure")
    before = state(items)
    with pytest.raises(BulkRefused) as refused:
        apply("tags_add", items[:3], reviewer, tags=("verbose",))
    assert refused.value.status == 422
    assert refused.value.message == "2 items of the selection have no label of yours yet: set a verdict on them first"
    assert state(items) == before


def test_the_split_is_set_and_undone(two_categories, reviewer):
    old, new, items, loose = two_categories
    for item in items[:3]:
        Label.objects.create(item=item, reviewer=reviewer, verdict="failure", split="train")
    before = state(items)
    action = apply("split", items[:3], reviewer, split="eval")
    assert set(Label.objects.filter(item__in=items[:3]).values_list("split", flat=True)) == {"eval"}
    bulk_undo(action_id=action.id, user=reviewer, made_by="rita")
    assert state(items) == before


def test_pinning_adds_members_once_and_undo_removes_only_the_new_ones(two_categories, reviewer):
    old, new, items, loose = two_categories
    dataset = Dataset.objects.create(name="evals", purpose="eval", formats=["eval_jsonl"])
    DatasetPin.objects.create(dataset_id=dataset.id, item=items[0])
    action = apply("pin", items, reviewer, dataset_id=dataset.id)
    assert action.item_count == 3 and "1 item pinned already" in action.summary
    assert DatasetPin.objects.filter(dataset_id=dataset.id).count() == 4
    bulk_undo(action_id=action.id, user=reviewer, made_by="rita")
    assert list(DatasetPin.objects.values_list("item_id", flat=True)) == [items[0].id]


def test_pinning_to_an_unknown_dataset_is_refused(two_categories, reviewer):
    old, new, items, loose = two_categories
    with pytest.raises(BulkRefused) as refused:
        apply("pin", items, reviewer, dataset_id=987654)
    assert (refused.value.status, refused.value.field) == (404, "dataset")
    assert not DatasetPin.objects.exists()


def test_sending_to_the_review_queue_samples_the_items_for_double_review(two_categories, reviewer):
    old, new, items, loose = two_categories
    action = apply("queue", items, reviewer)
    assert DoubleReview.objects.count() == 4
    bulk_undo(action_id=action.id, user=reviewer, made_by="rita")
    assert not DoubleReview.objects.exists()


def test_only_the_maker_or_an_admin_may_undo_and_only_once(two_categories, reviewer, second_reviewer, admin_user):
    old, new, items, loose = two_categories
    action = apply("move", items[:3], reviewer, category_id=new.id)
    with pytest.raises(BulkRefused) as refused:
        bulk_undo(action_id=action.id, user=second_reviewer, made_by="sam")
    assert refused.value.status == 403
    bulk_undo(action_id=action.id, user=admin_user, made_by="ada")
    with pytest.raises(BulkRefused) as again:
        bulk_undo(action_id=action.id, user=reviewer, made_by="rita")
    assert (again.value.status, again.value.message) == (409, "this bulk action was undone already")


def test_a_token_may_not_write_labels(two_categories):
    old, new, items, loose = two_categories
    with pytest.raises(BulkRefused) as refused:
        apply("verdict", items, None, verdict="failure")
    assert refused.value.status == 403 and not Label.objects.exists()


@pytest.mark.parametrize(
    ("selection", "status", "message"),
    [
        (Selection(), 422, "the selection is empty: tick some items, or select all matching"),
        (Selection(ids=(987654321,)), 404, "1 of the selected items do not exist: 987654321"),
        (Selection(ids=tuple(range(1, 10_002))), 413, "10,001 items selected; a bulk action takes at most 10,000"),
        (Selection(scope="nowhere"), 422, "filter scope must be one of search, category, area"),
    ],
)
def test_a_bad_selection_is_refused(two_categories, reviewer, selection, status, message):
    old, new, items, loose = two_categories
    before = state(items)
    with pytest.raises(SelectionRefused) as refused:
        bulk_apply(
            params=BulkParams(kind="move", category_id=new.id), selection=selection, actor=reviewer, made_by="rita"
        )
    assert (refused.value.status, refused.value.message) == (status, message)
    assert state(items) == before


def test_select_all_matching_takes_the_pages_filter(two_categories, reviewer):
    old, new, items, loose = two_categories
    items[0].rating = 1
    items[0].save()
    action = bulk_apply(
        params=BulkParams(kind="move", category_id=new.id),
        selection=Selection(scope="category", scope_id=old.id, params={"rating": "down"}),
        actor=reviewer,
        made_by="rita",
        origin=f"category:{old.id}",
    )
    assert action.item_count == 2
    assert Assignment.objects.get(item=items[0]).category_id == old.id
    assert action.category_id == new.id


def test_a_merge_can_be_undone(two_categories, reviewer):
    old, new, items, loose = two_categories
    earlier = category_make("Wrong file", status=Category.Status.MERGED)
    earlier.merged_into = old
    earlier.save()
    Label.objects.create(item=items[0], reviewer=reviewer, verdict="failure", category=old)
    before = state(items)

    category_merge_undoable(category_id=old.id, target_id=new.id, user=reviewer)
    assert Category.objects.get(id=old.id).status == Category.Status.MERGED
    action = BulkAction.objects.get(kind="merge")
    bulk_undo(action_id=action.id, user=reviewer, made_by="rita")

    old.refresh_from_db()
    earlier.refresh_from_db()
    assert old.status == Category.Status.PROPOSED and old.merged_into_id is None
    assert earlier.merged_into_id == old.id
    after = state(items)
    # Only the assignments' updated_at moved; who placed them and how sure stays.
    assert after["assignments"] == before["assignments"] and after["labels"] == before["labels"]
    assert Category.objects.get(id=old.id).size == 3 and Category.objects.get(id=new.id).size == 1


def test_a_thousand_items_move_in_a_fixed_number_of_queries(source, reviewer):
    old = category_make("Old")
    new = category_make("New")
    items = [item_make(source, category=old) for _ in range(40)]
    with CaptureQueriesContext(connection) as few:
        apply("move", items[:10], reviewer, category_id=new.id)
    with CaptureQueriesContext(connection) as many:
        apply("move", items, reviewer, category_id=old.id)
    assert len(many) == len(few)
