"""The Django admin shows feedback items scrubbed; the original is only behind the item page's audited reveal."""

import pytest

from feedback import pipeline
from feedback.models import FeedbackItem
from labeling.models import AuditEvent
from tests.factories.review import item_make, source  # noqa: F401 (fixtures)
from tests.factories.secrets import AWS_KEY, EMAIL, GITHUB_TOKEN, HOME, PHONE
from tests.factories.secrets import PLANTED as PLANTED_IN_TEXT

pytestmark = pytest.mark.django_db

USER_REF = "jane.doe@acme-corp.com#4417"
PLANTED = (*PLANTED_IN_TEXT, USER_REF)


@pytest.fixture
def secret_item(source):
    item = item_make(
        source,
        external_id="evt_admin_1",
        kind=FeedbackItem.Kind.REPORT,
        rating=None,
        title=f"Leaked {GITHUB_TOKEN}",
        comment=f"It printed {AWS_KEY} and mailed {EMAIL}.",
        expected=f"Call {PHONE} before touching prod",
        user_ref=USER_REF,
        last_error=f"could not embed: {AWS_KEY}",
        raw_payload={"comment": f"It printed {AWS_KEY}", "user_ref": USER_REF},
        context={
            "messages": [{"role": "user", "content": f"Fix {HOME}/src/app.py"}],
            "tool_calls": [{"name": "shell", "arguments": {"cmd": "env"}, "result": f"TOKEN={GITHUB_TOKEN}"}],
            "metadata": {"owner": EMAIL},
        },
    )
    item.embed_text = pipeline.embed_text_for(item)
    item.save(update_fields=["embed_text"])
    return item


@pytest.fixture
def plain_item(source):
    item = item_make(source, external_id="evt_admin_2", comment="The agent edited the wrong file.")
    item.embed_text = pipeline.embed_text_for(item)
    item.save(update_fields=["embed_text"])
    return item


def changelist_ids(admin_client, query: str) -> set[int]:
    response = admin_client.get("/admin/feedback/feedbackitem/", {"q": query})
    assert response.status_code == 200
    return {item.id for item in response.context["cl"].result_list}


def test_the_item_page_of_the_admin_shows_placeholders_and_no_original(admin_client, secret_item):
    response = admin_client.get(f"/admin/feedback/feedbackitem/{secret_item.id}/change/")
    assert response.status_code == 200
    html = response.content.decode()
    for secret in PLANTED:
        assert secret not in html, secret
    for placeholder in ("[SECRET:aws_access_key]", "[SECRET:github_token]", "[EMAIL]", "[PHONE]", "[PATH_HOME]/src"):
        assert placeholder in html, placeholder
    # The original is one click away, on the page whose reveal is audited.
    assert f'href="/items/{secret_item.id}/"' in html and "Reveal original" in html
    assert not AuditEvent.objects.exists()


def test_the_admin_changelist_previews_scrubbed_text(admin_client, secret_item, plain_item):
    html = admin_client.get("/admin/feedback/feedbackitem/").content.decode()
    for secret in PLANTED:
        assert secret not in html, secret
    assert "[SECRET:github_token]" in html and "The agent edited the wrong file." in html


def test_the_admin_search_does_not_find_an_item_by_a_key_prefix_or_an_email(admin_client, secret_item, plain_item):
    for probe in (AWS_KEY[:8], AWS_KEY, GITHUB_TOKEN[:10], EMAIL, "acme-corp", USER_REF, "jdoe"):
        assert changelist_ids(admin_client, probe) == set(), probe
    assert not AuditEvent.objects.exists()


def test_the_admin_search_finds_items_by_id_external_id_and_scrubbed_words(admin_client, secret_item, plain_item):
    assert changelist_ids(admin_client, str(secret_item.id)) == {secret_item.id}
    assert changelist_ids(admin_client, "evt_admin_2") == {plain_item.id}
    assert changelist_ids(admin_client, "wrong file") == {plain_item.id}
    assert changelist_ids(admin_client, "leaked") == {secret_item.id}
    assert changelist_ids(admin_client, "") == {secret_item.id, plain_item.id}


def test_the_admin_neither_adds_nor_edits_items(admin_client, secret_item):
    assert admin_client.get("/admin/feedback/feedbackitem/add/").status_code == 403
    response = admin_client.post(
        f"/admin/feedback/feedbackitem/{secret_item.id}/change/", {"comment": "changed", "title": "changed"}
    )
    assert response.status_code == 403
    secret_item.refresh_from_db()
    assert secret_item.comment.startswith("It printed")


def test_the_admin_link_leads_to_the_audited_reveal(admin_client, admin_user, secret_item):
    assert AWS_KEY not in admin_client.get(f"/items/{secret_item.id}/").content.decode()
    html = admin_client.post(f"/items/{secret_item.id}/reveal").content.decode()
    assert AWS_KEY in html and "Raw payload (admins)" in html
    event = AuditEvent.objects.get(action="revealed original")
    assert event.item_id == secret_item.id and event.actor_id == admin_user.id


def test_a_deleted_item_is_gone_and_the_others_remain(admin_client, secret_item, plain_item):
    response = admin_client.post(f"/admin/feedback/feedbackitem/{secret_item.id}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert list(FeedbackItem.objects.values_list("id", flat=True)) == [plain_item.id]


def test_run_errors_in_the_admin_are_scrubbed(admin_client):
    from exports.models import Dataset, ExportRun
    from labeling.models import ClusterRun

    error = f"ValueError: cannot convert {EMAIL} near {AWS_KEY}"
    dataset = Dataset.objects.create(name="coding-failures", purpose="train", formats=["jsonl"])
    export_run = ExportRun.objects.create(dataset=dataset, trigger="command", status="failed", active=None, error=error)
    cluster_run = ClusterRun.objects.create(trigger="command", status="failed", active=None, error=error)
    for url in (
        f"/admin/exports/exportrun/{export_run.id}/change/",
        f"/admin/labeling/clusterrun/{cluster_run.id}/change/",
    ):
        response = admin_client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert EMAIL not in html and AWS_KEY not in html, url
        assert "ValueError: cannot convert [EMAIL] near [SECRET:aws_access_key]" in html, url
