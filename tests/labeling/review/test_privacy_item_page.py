"""The item page shows scrubbed text; a reviewer may reveal the original, and the reveal is audited."""

import pytest

from feedback import vector_index
from feedback.models import FeedbackItem
from labeling.models import AuditEvent
from tests.factories.review import item_make
from tests.factories.secrets import AWS_KEY, EMAIL, GITHUB_TOKEN, HOME, PHONE, PLANTED

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_vector_index(monkeypatch):
    monkeypatch.setattr(vector_index, "_index", vector_index.VectorIndex())


@pytest.fixture
def secret_item(source):
    return item_make(
        source,
        kind=FeedbackItem.Kind.REPORT,
        rating=None,
        title=f"Leaked {GITHUB_TOKEN}",
        comment=f"It printed {AWS_KEY} and mailed {EMAIL}.",
        expected=f"Call {PHONE} before touching prod",
        raw_payload={"comment": f"It printed {AWS_KEY}"},
        context={
            "transcript": f"$ ls {HOME}/src",
            "messages": [{"role": "user", "content": f"Fix {HOME}/src/app.py"}],
            "tool_calls": [{"name": "shell", "arguments": {"cmd": "env"}, "result": f"TOKEN={GITHUB_TOKEN}"}],
            "metadata": {"owner": EMAIL},
        },
    )


def test_the_page_shows_placeholders_by_default(client, reviewer, secret_item):
    client.force_login(reviewer)
    html = client.get(f"/items/{secret_item.id}/").content.decode()
    for secret in PLANTED:
        assert secret not in html, secret
    for placeholder in ("[SECRET:aws_access_key]", "[SECRET:github_token]", "[EMAIL]", "[PHONE]", "[PATH_HOME]/src"):
        assert placeholder in html, placeholder
    assert 'id="reveal-original"' in html and f'action="/items/{secret_item.id}/reveal"' in html
    assert "Raw payload" not in html
    assert not AuditEvent.objects.filter(action="revealed original").exists()


def test_reveal_shows_the_original_and_records_an_audit_event(client, reviewer, secret_item):
    client.force_login(reviewer)
    response = client.post(f"/items/{secret_item.id}/reveal")
    assert response.status_code == 200
    html = response.content.decode()
    for secret in PLANTED:
        assert secret in html, secret
    assert "Showing the original text" in html and 'id="reveal-original"' not in html
    assert "Raw payload" not in html  # still admins only
    assert response["Cache-Control"] == "no-store"
    event = AuditEvent.objects.get(action="revealed original")
    assert event.item_id == secret_item.id and event.actor_id == reviewer.id
    # The next plain visit is scrubbed again.
    assert AWS_KEY not in client.get(f"/items/{secret_item.id}/").content.decode()


def test_reveal_needs_csrf(reviewer, secret_item):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    assert client.post(f"/items/{secret_item.id}/reveal").status_code == 403
    assert not AuditEvent.objects.filter(action="revealed original").exists()


def test_reveal_refuses_anonymous_get_and_users_without_a_role(client, no_role_user, reviewer, secret_item):
    url = f"/items/{secret_item.id}/reveal"
    anonymous = client.post(url)
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]

    client.force_login(no_role_user)
    assert client.post(url).status_code == 403

    client.force_login(reviewer)
    assert client.get(url).status_code == 405
    assert client.post("/items/999999/reveal").status_code == 404
    assert not AuditEvent.objects.filter(action="revealed original").exists()


def test_admins_see_the_raw_payload_only_with_an_audited_reveal(client, admin_user, secret_item):
    client.force_login(admin_user)
    html = client.get(f"/items/{secret_item.id}/").content.decode()
    assert "Raw payload (admins)" not in html and AWS_KEY not in html
    html = client.post(f"/items/{secret_item.id}/reveal").content.decode()
    assert "Raw payload (admins)" in html and AWS_KEY in html
    assert AuditEvent.objects.filter(item=secret_item, actor=admin_user, action="revealed original").count() == 1
