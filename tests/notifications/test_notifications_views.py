"""/notifications/: admins add, edit, test and delete destinations and see every delivery."""

import re

import pytest

from notifications.models import Delivery, Destination, Event, Notification
from notifications import services
from tests.factories import client_for, user_make

pytestmark = pytest.mark.django_db

VALID = {
    "name": "team channel",
    "kind": "webhook",
    "url": "https://hooks.example.com/feedback?token=s3cr3t",
    "events": [Event.REGRESSION, Event.EXPORT_FAILED],
}


@pytest.fixture
def admin():
    return client_for(user_make("boss", "admin"))


def post_new(client, **changes):
    return client.post("/notifications/destinations/new", {**VALID, **changes})


def error_of(response) -> list[str]:
    return re.findall(r'<p class="error" role="alert">([^<]*)</p>', response.content.decode())


def test_anonymous_callers_are_sent_to_log_in_and_reviewers_are_refused():
    from django.test import Client

    anonymous = Client()
    reviewer = client_for(user_make("rev", "reviewer"))
    for path in ("/notifications/", "/notifications/destinations/new"):
        response = anonymous.post(path, VALID) if path.endswith("new") else anonymous.get(path)
        assert response.status_code == 302 and response.url.startswith("/login/")
        response = reviewer.post(path, VALID) if path.endswith("new") else reviewer.get(path)
        assert response.status_code == 403
    assert Destination.objects.count() == 0


def test_the_nav_links_the_page_for_admins_only(admin):
    assert 'href="/notifications/"' in admin.get("/notifications/").content.decode()
    reviewer = client_for(user_make("rev", "reviewer"))
    assert 'href="/notifications/"' not in reviewer.get("/search/").content.decode()


def test_a_new_webhook_destination_shows_its_secret_once_and_never_its_full_url(admin):
    response = post_new(admin)
    assert response.status_code == 200
    html = response.content.decode()
    secret = re.search(r'id="destination-secret">(whsec_[A-Za-z0-9+/=]+)<', html).group(1)
    assert "no-store" in response.headers["Cache-Control"]
    destination = Destination.objects.get()
    assert destination.secret == secret and destination.events == [Event.REGRESSION, Event.EXPORT_FAILED]
    page = admin.get("/notifications/").content.decode()
    assert secret not in page and "s3cr3t" not in page
    assert "https://hooks.example.com/…" in page


def test_a_slack_destination_has_no_secret(admin):
    response = post_new(admin, kind="slack", url="https://hooks.slack.com/services/T000/B000/XXXX")
    assert response.status_code == 200
    assert "whsec_" not in response.content.decode()
    assert Destination.objects.get().secret == ""


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"url": "not a url"}, "The URL must not contain spaces or control characters."),
        ({"url": "ftp://files.example.com/x"}, "The URL must start with https:// (or http://)."),
        ({"url": "javascript:alert(1)"}, "The URL must start with https:// (or http://)."),
        ({"url": "https:///path-only"}, "The URL names no host."),
        ({"url": "https://example.com:99999/"}, "The URL cannot be read; give one like https://hooks.example.com/path."),
        ({"url": "https://user:pw@example.com/"}, "Put no user name or password in the URL; a signed webhook carries its own secret."),
        ({"url": ""}, "Give the URL to send to."),
        ({"url": "https://example.com/" + "a" * 2000}, "The URL is 2020 characters long; at most 2000 are allowed."),
        ({"name": "   "}, "Give the destination a name."),
        ({"name": "n" * 101}, "The name is 101 characters long; at most 100 are allowed."),
        ({"events": []}, "Choose at least one event to hear about."),
        ({"events": ["nope"]}, "Select a valid choice. nope is not one of the available choices."),
        ({"events": ["test"]}, "Select a valid choice. test is not one of the available choices."),
        ({"kind": "email"}, "Select a valid choice. email is not one of the available choices."),
    ],
)
def test_a_bad_destination_is_refused_with_the_reason_and_nothing_is_saved(admin, changes, message):
    post_new(admin, name="kept", url="https://kept.example.com/")
    response = post_new(admin, **changes)
    assert response.status_code == 422
    assert message in [error.replace("&#x27;", "'") for error in error_of(response)], error_of(response)
    assert list(Destination.objects.values_list("name", flat=True)) == ["kept"]


def test_a_duplicate_name_is_refused_and_the_first_destination_is_kept(admin):
    post_new(admin)
    response = post_new(admin, url="https://other.example.com/")
    assert response.status_code == 422
    assert "A destination named “team channel” exists already." in error_of(response)
    assert Destination.objects.get().url == VALID["url"]


def test_a_nul_character_in_the_form_is_refused(admin):
    response = post_new(admin, name="bad\x00name")
    assert response.status_code == 400
    assert Destination.objects.count() == 0


def test_odd_but_valid_input_is_kept_as_given(admin):
    response = post_new(
        admin, name="  📣 équipe — alerts  ", url="https://bücher.example/hook?a=1&b=%20", events=[Event.EXPORT_FAILED, Event.REGRESSION, Event.REGRESSION]
    )
    assert response.status_code == 200
    destination = Destination.objects.get()
    assert destination.name == "📣 équipe — alerts"
    assert destination.url == "https://bücher.example/hook?a=1&b=%20"
    assert destination.url_display == "https://bücher.example/…"
    # Each event once, in the order of the choices.
    assert destination.events == [Event.REGRESSION, Event.EXPORT_FAILED]


def test_an_admin_edits_switches_off_and_deletes_a_destination(admin):
    post_new(admin)
    destination = Destination.objects.get()
    response = admin.post(
        f"/notifications/destinations/{destination.id}/edit", {"name": "renamed", "events": [Event.PIPELINE_FAILED]}
    )
    assert response.status_code == 302
    destination.refresh_from_db()
    assert (destination.name, destination.events, destination.is_active) == ("renamed", [Event.PIPELINE_FAILED], False)
    # A bad edit says why and changes nothing.
    response = admin.post(f"/notifications/destinations/{destination.id}/edit", {"name": "renamed", "events": []})
    assert response.status_code == 422 and "Choose at least one event to hear about." in response.content.decode()
    destination.refresh_from_db()
    assert destination.events == [Event.PIPELINE_FAILED]
    assert admin.post(f"/notifications/destinations/{destination.id}/delete").status_code == 302
    assert Destination.objects.count() == 0
    assert admin.post(f"/notifications/destinations/{destination.id}/delete").status_code == 404


def test_send_test_queues_one_delivery_to_that_destination_even_when_switched_off(admin):
    post_new(admin)
    destination = Destination.objects.get()
    services.destination_update(destination=destination, name=destination.name, events=destination.events, is_active=False)
    response = admin.post(f"/notifications/destinations/{destination.id}/test", follow=True)
    assert response.status_code == 200
    assert "Test message queued for “team channel”" in response.content.decode()
    delivery = Delivery.objects.get()
    assert delivery.destination_id == destination.id and delivery.notification.event == Event.TEST
    assert "Test message from Feedback Studio" in response.content.decode()


def test_unknown_ids_answer_404_and_gets_on_actions_answer_405(admin):
    for path in (
        "/notifications/destinations/999/test",
        "/notifications/destinations/999/edit",
        "/notifications/deliveries/999/retry",
    ):
        assert admin.post(path).status_code == 404
        assert admin.get(path).status_code == 405
    # Past a bigint: no such destination, not a database error.
    assert admin.post("/notifications/destinations/99999999999999999999/test").status_code == 404


def test_the_delivery_list_filters_by_status_and_ignores_a_bad_filter(admin):
    post_new(admin)
    destination = Destination.objects.get()
    services.notify_test(destination=destination)
    notification = Notification.objects.get()
    Delivery.objects.update(status="failed", last_error="HTTP 410: gone")
    page = admin.get("/notifications/?status=failed").content.decode()
    assert "HTTP 410: gone" in page and notification.summary in page
    assert "HTTP 410: gone" not in admin.get("/notifications/?status=delivered").content.decode()
    for odd in ("?status=%00", "?status=" + "x" * 5000, "?destination=²", "?destination=-1"):
        response = admin.get("/notifications/" + odd)
        assert response.status_code in (200, 400)
        if response.status_code == 200:
            assert "HTTP 410: gone" in response.content.decode()
