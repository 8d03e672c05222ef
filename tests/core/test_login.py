"""Login: throttling with a cool-off, session handling."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

pytestmark = pytest.mark.django_db


@pytest.fixture
def dana():
    return get_user_model().objects.create_user("dana", password="right-password-1")


def attempt(client, password, address="10.0.0.1"):
    return client.post("/login/", {"username": "dana", "password": password}, REMOTE_ADDR=address)


def test_five_failures_lock_the_username_for_that_address(dana):
    client = Client()
    for _ in range(5):
        response = attempt(client, "wrong")
    assert response.status_code in (200, 429)
    response = attempt(client, "right-password-1")
    assert response.status_code == 429
    assert b"Too many failed logins" in response.content
    assert "_auth_user_id" not in client.session


def test_the_same_reviewer_can_still_log_in_from_another_address(dana):
    for _ in range(6):
        attempt(Client(), "wrong", address="10.0.0.66")
    client = Client()
    response = attempt(client, "right-password-1", address="10.0.0.2")
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(dana.id)


def test_the_lock_ends_after_the_cool_off(dana):
    client = Client()
    for _ in range(6):
        attempt(client, "wrong")
    assert attempt(client, "right-password-1").status_code == 429
    # Let the cool-off pass: the failures now lie 16 minutes back.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert attempt(client, "right-password-1").status_code == 302


def test_the_session_key_changes_at_login_and_logout_ends_the_session(dana):
    client = Client()
    client.get("/login/")
    client.cookies["sessionid"] = "attacker-chosen-session-key"
    attempt(client, "right-password-1")
    key = client.session.session_key
    assert key and key != "attacker-chosen-session-key"
    assert client.get("/reports/new").status_code == 200
    client.post("/logout/")
    assert client.get("/reports/new").status_code == 302


def test_deactivating_a_user_ends_their_sessions(dana):
    client = Client()
    attempt(client, "right-password-1")
    assert client.get("/reports/new").status_code == 200
    dana.is_active = False
    dana.save()
    assert client.get("/reports/new").status_code == 302
