"""/reports/new: the dogfooding report form."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from feedback.models import FeedbackItem

pytestmark = pytest.mark.django_db

FORM = {
    "title": "Edited the wrong file",
    "what_happened": "Asked to change utils.py; it changed main.py.",
    "expected": "Change utils.py only.",
    "severity": "high",
    "model_version": "coder-2.1",
    "transcript": "> edit_file main.py",
}


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_user("dana", password="pw-dana-123")
    client.force_login(user)
    return user


def test_anonymous_users_are_sent_to_login(client):
    response = client.get("/reports/new")
    assert response.status_code == 302
    assert response.url.startswith("/login/?next=/reports/new")
    response = client.post("/reports/new", FORM)
    assert response.status_code == 302
    assert FeedbackItem.objects.count() == 0


def test_a_logged_in_user_files_a_report(client, staff):
    response = client.post("/reports/new", FORM, follow=True)
    assert response.status_code == 200
    assert b"filed. Thank you." in response.content
    item = FeedbackItem.objects.get()
    assert item.kind == "report" and item.reporter == staff
    assert item.source.slug == "dogfooding-form"
    assert item.title == FORM["title"] and item.severity == "high"
    assert item.context == {"transcript": "> edit_file main.py"}


def test_missing_fields_are_shown_and_nothing_is_stored(client, staff):
    response = client.post("/reports/new", dict(FORM, title="", what_happened=""))
    assert response.status_code == 422
    assert b"This field is required." in response.content
    assert b'value="coder-2.1"' in response.content  # what was typed is kept
    assert FeedbackItem.objects.count() == 0


def test_an_unknown_severity_is_refused(client, staff):
    response = client.post("/reports/new", dict(FORM, severity="apocalyptic"))
    assert response.status_code == 422
    assert b"Select a valid choice" in response.content
    assert FeedbackItem.objects.count() == 0


def test_a_post_without_a_csrf_token_is_refused(staff):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    response = client.post("/reports/new", FORM)
    assert response.status_code == 403
    assert FeedbackItem.objects.count() == 0


def test_the_form_page_renders_for_a_logged_in_user(client, staff):
    response = client.get("/reports/new")
    assert response.status_code == 200
    assert b"File a dogfooding report" in response.content
