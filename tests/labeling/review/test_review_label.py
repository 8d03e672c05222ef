"""Saving a label: the form's checks, the upsert, the assignment it moves, the audit event."""

import pytest

from feedback.models import FeedbackItem
from labeling.review import services as review_services
from labeling.models import Assignment, AuditEvent, Category, Label, ReviewLock
from labeling.review.services import HINT_MAX_LENGTH, LabelRefused, label_save
from tests.factories.review import category_make, item_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, reviewer):
    client.force_login(reviewer)
    return client


def form(**overrides):
    data = {
        "verdict": "failure",
        "category": "",
        "severity": "high",
        "tags": ["claimed success falsely", "wrong file"],
        "other_tags": "flaky, ci",
        "hint": "Run the tests and report the failures.",
        "corrected_response": "",
        "split": "train",
    }
    data.update(overrides)
    return data


def snapshot(item):
    assignment = Assignment.objects.filter(item=item).values_list("category_id", "assigned_by", "confidence").first()
    return (
        list(Label.objects.values_list("id", "verdict", "category_id", "hint", "updated_at")),
        assignment,
        AuditEvent.objects.count(),
        list(Category.objects.order_by("id").values_list("id", "size")),
    )


def test_saving_a_label_creates_it_moves_the_assignment_to_the_reviewer_and_audits_it(
    logged_in, item, reviewer, model_category, confirmed_category
):
    response = logged_in.post(f"/items/{item.id}/", form(category=str(confirmed_category.id)), follow=True)
    assert response.status_code == 200
    assert f"Label saved for #{item.id}." in response.content.decode()
    label = Label.objects.get(item=item, reviewer=reviewer)
    assert (label.verdict, label.category, label.severity, label.split) == ("failure", confirmed_category, "high", "train")
    assert label.tags == ["claimed success falsely", "wrong file", "flaky", "ci"]
    assert label.hint == "Run the tests and report the failures."
    assignment = Assignment.objects.get(item=item)
    assert (assignment.category, assignment.assigned_by, assignment.reviewer) == (confirmed_category, "reviewer", reviewer)
    assert assignment.confidence is None
    model_category.refresh_from_db()
    confirmed_category.refresh_from_db()
    assert (model_category.size, confirmed_category.size) == (0, 1)
    event = AuditEvent.objects.get()
    assert (event.actor, event.action, event.item) == (reviewer, "labelled", item)
    assert event.details["verdict"] == "failure" and event.details["split"] == "train"
    assert event.details["category"] == f"Claims tests pass (#{confirmed_category.id})"
    assert event.details["assignment"] == (
        f"Edits the wrong file (#{model_category.id}) → Claims tests pass (#{confirmed_category.id})"
    )
    assert event.details["changed"] == "new label"
    assert "Claims tests pass" in response.content.decode()  # the history on the page shows it


def test_saving_again_updates_the_one_label_and_audits_only_what_changed(logged_in, item, reviewer, model_category):
    logged_in.post(f"/items/{item.id}/", form(category=str(model_category.id)))
    logged_in.post(f"/items/{item.id}/", form(category=str(model_category.id), hint="Ask which file.", split="eval"))
    label = Label.objects.get(item=item)
    assert (label.hint, label.split) == ("Ask which file.", "eval")
    latest = AuditEvent.objects.first()
    assert latest.details["changed"] == "hint, split" and "assignment" not in latest.details
    assert AuditEvent.objects.count() == 2
    response = logged_in.post(
        f"/items/{item.id}/", form(category=str(model_category.id), hint="Ask which file.", split="eval"), follow=True
    )
    assert "Nothing changed" in response.content.decode()
    assert AuditEvent.objects.count() == 2


def test_a_cluster_run_keeps_the_reviewers_category(item, reviewer, confirmed_category):
    from labeling.clustering.services import items_assign

    label_save(item=item, reviewer=reviewer, verdict="failure", category=confirmed_category)
    items_assign(item_ids=[item.id])
    assert Assignment.objects.get(item=item).category == confirmed_category


def test_a_verdict_that_is_not_a_failure_keeps_no_category_and_leaves_the_assignment(item, reviewer, confirmed_category):
    saved = label_save(item=item, reviewer=reviewer, verdict="not_failure", category=confirmed_category)
    assert saved.label.category is None and not saved.assignment_moved
    assert Assignment.objects.get(item=item).assigned_by == "model"


def test_labelling_an_embedded_unassigned_item_marks_it_assigned(source, reviewer, confirmed_category):
    item = item_make(source)
    label_save(item=item, reviewer=reviewer, verdict="failure", category=confirmed_category)
    item.refresh_from_db()
    assert item.status == FeedbackItem.Status.ASSIGNED
    waiting = item_make(source, status=FeedbackItem.Status.RECEIVED)
    label_save(item=waiting, reviewer=reviewer, verdict="failure", category=confirmed_category)
    waiting.refresh_from_db()
    assert waiting.status == FeedbackItem.Status.RECEIVED  # the pipeline still has to embed it


def test_two_reviewers_each_have_their_own_label(item, reviewer, second_reviewer):
    label_save(item=item, reviewer=reviewer, verdict="failure")
    label_save(item=item, reviewer=second_reviewer, verdict="not_failure")
    assert sorted(Label.objects.values_list("verdict", flat=True)) == ["failure", "not_failure"]


def test_saving_releases_the_reviewers_lock(item, reviewer):
    review_services.review_lock_take(item_id=item.id, reviewer=reviewer)
    label_save(item=item, reviewer=reviewer, verdict="spam")
    assert not ReviewLock.objects.exists()


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"verdict": "catastrophe"}, "Select a valid choice. catastrophe is not one of the available choices."),
        ({"verdict": ""}, "Choose a verdict."),
        ({"category": "999999"}, "That category does not exist or was merged or archived"),
        ({"category": "not-a-number"}, "That category does not exist or was merged or archived"),
        ({"hint": "x" * (HINT_MAX_LENGTH + 1)}, f"Ensure this value has at most {HINT_MAX_LENGTH} characters"),
        ({"split": "test"}, "Select a valid choice. test is not one of the available choices."),
        ({"severity": "apocalyptic"}, "Select a valid choice. apocalyptic is not one of the available choices."),
        ({"tags": ["made up tag"]}, "Select a valid choice. made up tag is not one of the available choices."),
        ({"other_tags": "x" * 51}, "Tags are at most 50 characters"),
    ],
)
def test_bad_input_is_refused_with_a_visible_message_and_nothing_changes(logged_in, item, overrides, message):
    before = snapshot(item)
    response = logged_in.post(f"/items/{item.id}/", form(**overrides))
    assert response.status_code == 422
    html = response.content.decode()
    assert "The label was not saved" in html
    assert message in html
    assert snapshot(item) == before


@pytest.mark.parametrize("status", [Category.Status.MERGED, Category.Status.ARCHIVED])
def test_a_merged_or_archived_category_is_refused(logged_in, item, status):
    closed = category_make("Closed", status=status)
    before = snapshot(item)
    response = logged_in.post(f"/items/{item.id}/", form(category=str(closed.id)))
    assert response.status_code == 422
    assert "That category does not exist or was merged or archived" in response.content.decode()
    assert snapshot(item) == before


def test_bad_input_keeps_what_the_reviewer_typed(logged_in, item):
    response = logged_in.post(f"/items/{item.id}/", form(verdict="", hint="keep this hint"))
    assert response.status_code == 422
    assert "keep this hint" in response.content.decode()


def test_the_service_refuses_a_category_closed_after_the_form_was_checked(item, reviewer, confirmed_category):
    Category.objects.filter(id=confirmed_category.id).update(status=Category.Status.MERGED)
    before = snapshot(item)
    with pytest.raises(LabelRefused, match="merged or archived"):
        label_save(item=item, reviewer=reviewer, verdict="failure", category=confirmed_category)
    assert snapshot(item) == before


def test_the_service_refuses_an_unknown_verdict_and_a_long_hint(item, reviewer):
    with pytest.raises(LabelRefused):
        label_save(item=item, reviewer=reviewer, verdict="maybe")
    with pytest.raises(LabelRefused):
        label_save(item=item, reviewer=reviewer, verdict="failure", hint="x" * (HINT_MAX_LENGTH + 1))
    assert not Label.objects.exists() and not AuditEvent.objects.exists()


def test_saving_in_queue_mode_goes_on_to_the_next_item(logged_in, item, model_category):
    response = logged_in.post(f"/items/{item.id}/?queue={model_category.id}", form(category=str(model_category.id)))
    assert response.status_code == 302
    assert response.url == f"/review/next?category={model_category.id}"
