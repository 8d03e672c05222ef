"""The label panel: the reported severity filled in, numbered tags, and undo of a save."""

from datetime import timedelta

import pytest
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.review import services as review_services
from labeling.models import Assignment, AuditEvent, Category, Label
from labeling.review.services import LabelRefused, label_save, label_undo
from tests.factories import client_for
from tests.factories.review import category_make, item_make, user_make

pytestmark = pytest.mark.django_db


def state(item):
    """Everything a save touches, to compare before and after."""
    assignment = (
        Assignment.objects.filter(item=item)
        .values_list("category_id", "assigned_by", "confidence", "reviewer_id")
        .first()
    )
    labels = list(Label.objects.filter(item=item).values_list("reviewer_id", "verdict", "category_id", "hint", "tags"))
    sizes = dict(Category.objects.values_list("id", "size"))
    status = FeedbackItem.objects.get(id=item.id).status
    return labels, assignment, sizes, status


def save(client, item, **fields):
    data = {"verdict": "failure", "split": "none"} | fields
    return client.post(f"/items/{item.id}/", data)


# --- Reported severity and numbered tags ---------------------------------------------------


def test_a_reported_severity_is_preselected_until_the_reviewer_gives_their_own(source, reviewer):
    item = item_make(source, kind="report", rating=None, severity="critical", title="Claimed the suite passed")
    client = client_for(reviewer)
    html = client.get(f"/items/{item.id}/").content.decode()
    assert '<option value="critical" selected>' in html
    assert 'id="reported-severity">Reported: critical<' in html
    Label.objects.create(item=item, reviewer=reviewer, verdict="failure", severity="low")
    html = client.get(f"/items/{item.id}/").content.decode()
    assert '<option value="low" selected>' in html and '<option value="critical" selected>' not in html


def test_an_item_without_a_reported_severity_starts_with_none(source, reviewer):
    item = item_make(source)
    html = client_for(reviewer).get(f"/items/{item.id}/").content.decode()
    assert '<option value="" selected>' in html and 'id="reported-severity"' not in html


def test_every_tag_has_its_key_one_to_nine_then_zero(source, reviewer):
    item = item_make(source)
    html = client_for(reviewer).get(f"/items/{item.id}/").content.decode()
    for key, tag in zip("1234567890", review_services.LABEL_TAGS):
        assert f'data-key="{key}" name="tags" value="{tag}"' in html


# --- Undo: the service ---------------------------------------------------------------------


def test_undo_of_a_new_label_removes_it_and_gives_the_item_its_model_category_back(
    item, reviewer, model_category, confirmed_category
):
    before = state(item)
    saved = label_save(item=item, reviewer=reviewer, verdict="failure", category=confirmed_category, hint="Ask first.")
    assert state(item) != before
    assert label_undo(reviewer=reviewer, undo=saved.undo) is None
    assert state(item) == before
    event = AuditEvent.objects.filter(item=item).first()
    assert (event.action, event.details["label"]) == ("undid label", "removed (it was new)")


def test_undo_of_an_edit_restores_the_label_as_it_was(item, reviewer):
    label_save(item=item, reviewer=reviewer, verdict="failure", tags=["verbose"], hint="First thought.")
    before = state(item)
    saved = label_save(item=item, reviewer=reviewer, verdict="not_failure", hint="Second thought.")
    restored = label_undo(reviewer=reviewer, undo=saved.undo)
    assert (restored.verdict, restored.hint, restored.tags) == ("failure", "First thought.", ["verbose"])
    assert state(item) == before


def test_undo_of_an_item_that_had_no_category_leaves_it_unassigned_again(source, reviewer, confirmed_category):
    item = item_make(source)
    before = state(item)
    saved = label_save(item=item, reviewer=reviewer, verdict="failure", category=confirmed_category)
    assert Assignment.objects.get(item=item).category == confirmed_category
    label_undo(reviewer=reviewer, undo=saved.undo)
    assert state(item) == before and not Assignment.objects.filter(item=item).exists()


def test_undo_is_refused_after_the_time_is_up_and_nothing_changes(item, reviewer):
    saved = label_save(item=item, reviewer=reviewer, verdict="spam")
    before = state(item)
    later = timezone.now() + timedelta(seconds=review_services.UNDO_SECONDS + 1)
    with pytest.raises(LabelRefused, match="only possible for 30 seconds"):
        label_undo(reviewer=reviewer, undo=saved.undo, now=later)
    assert state(item) == before


def test_undo_never_overwrites_a_label_changed_since(item, reviewer):
    first = label_save(item=item, reviewer=reviewer, verdict="spam")
    label_save(item=item, reviewer=reviewer, verdict="duplicate")
    before = state(item)
    with pytest.raises(LabelRefused, match="label changed since"):
        label_undo(reviewer=reviewer, undo=first.undo)
    assert state(item) == before


def test_undo_never_overwrites_a_category_someone_else_gave_since(item, reviewer, second_reviewer, confirmed_category):
    saved = label_save(item=item, reviewer=reviewer, verdict="failure", category=confirmed_category)
    third = category_make("Third opinion", status=Category.Status.CONFIRMED)
    label_save(item=item, reviewer=second_reviewer, verdict="failure", category=third)
    before = state(item)
    with pytest.raises(LabelRefused, match="category changed since"):
        label_undo(reviewer=reviewer, undo=saved.undo)
    assert state(item) == before


def test_one_reviewer_cannot_undo_anothers_save(item, reviewer, second_reviewer):
    saved = label_save(item=item, reviewer=reviewer, verdict="spam")
    before = state(item)
    with pytest.raises(LabelRefused):
        label_undo(reviewer=second_reviewer, undo=saved.undo)
    assert state(item) == before


@pytest.mark.parametrize("undo", [{}, {"item": "x", "label": 1, "saved_at": "now"}, {"saved_at": None}])
def test_a_malformed_undo_is_refused(item, reviewer, undo):
    with pytest.raises(LabelRefused, match="nothing to undo"):
        label_undo(reviewer=reviewer, undo=undo)


def test_a_save_that_changed_nothing_offers_no_undo(item, reviewer):
    label_save(item=item, reviewer=reviewer, verdict="spam")
    assert label_save(item=item, reviewer=reviewer, verdict="spam").undo == {}


# --- Undo: the page ------------------------------------------------------------------------


def test_after_a_save_the_page_offers_undo_and_undo_puts_the_item_back(item, reviewer, model_category):
    client = client_for(reviewer)
    before = state(item)
    response = client.get(f"/review/next?category={model_category.id}")
    assert response.url == f"/items/{item.id}/?queue={model_category.id}"
    response = save(client, item, verdict="not_failure")
    assert response.status_code == 302
    page = client.get(response.url, follow=True).content.decode()
    assert 'id="undo-bar" data-seconds="' in page and f'action="/items/{item.id}/undo-label"' in page

    response = client.post(f"/items/{item.id}/undo-label", {"queue": str(model_category.id)})
    assert response.status_code == 302 and response.url == f"/items/{item.id}/?queue={model_category.id}"
    page = client.get(response.url).content.decode()
    assert f"Undone: #{item.id} is back as it was before the save." in page
    assert 'id="undo-bar"' not in page
    assert state(item) == before
    # The reviewer holds the item again, so the queue hands it back to them.
    assert client.get(f"/review/next?category={model_category.id}").url.startswith(f"/items/{item.id}/")


def test_undo_twice_is_refused_the_second_time_and_keeps_what_the_first_did(item, reviewer):
    client = client_for(reviewer)
    save(client, item, verdict="spam")
    client.post(f"/items/{item.id}/undo-label")
    save(client, item, verdict="duplicate")
    client.post(f"/items/{item.id}/undo-label")
    after_first = state(item)
    response = client.post(f"/items/{item.id}/undo-label", follow=True)
    assert response.status_code == 200
    assert f"There is no recent save on #{item.id} to undo." in response.content.decode()
    assert state(item) == after_first


def test_undo_names_the_item_it_is_for(source, item, reviewer):
    other = item_make(source)
    client = client_for(reviewer)
    save(client, item, verdict="spam")
    before = state(item)
    response = client.post(f"/items/{other.id}/undo-label", follow=True)
    assert f"There is no recent save on #{other.id} to undo." in response.content.decode()
    assert state(item) == before


def test_undo_after_the_time_is_up_says_so(item, reviewer):
    client = client_for(reviewer)
    save(client, item, verdict="spam")
    session = client.session
    undo = session["label_undo"]
    undo["saved_at"] = (timezone.now() - timedelta(minutes=5)).isoformat()
    session["label_undo"] = undo
    session.save()
    before = state(item)
    assert 'id="undo-bar"' not in client.get(f"/items/{item.id}/").content.decode()
    response = client.post(f"/items/{item.id}/undo-label", follow=True)
    assert "Not undone: undo is only possible for 30 seconds after a save." in response.content.decode()
    assert state(item) == before


def test_undo_needs_a_post_and_a_reviewer(client, item, reviewer):
    reviewer_client = client_for(reviewer)
    save(reviewer_client, item, verdict="spam")
    before = state(item)
    assert reviewer_client.get(f"/items/{item.id}/undo-label").status_code == 405
    anonymous = client.post(f"/items/{item.id}/undo-label")
    assert anonymous.status_code == 302 and anonymous.url.startswith("/login/")
    staff = client_for(user_make("nobody"))
    assert staff.post(f"/items/{item.id}/undo-label").status_code == 403
    assert state(item) == before


def test_a_refused_save_offers_no_undo(item, reviewer):
    client = client_for(reviewer)
    response = save(client, item, verdict="maybe")
    assert response.status_code == 422
    assert "label_undo" not in client.session and not Label.objects.exists()
