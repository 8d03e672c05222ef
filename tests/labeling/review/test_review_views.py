"""Who may open and use the review pages: every view checks the role on the server."""

import pytest

from labeling.models import AuditEvent, DoubleReview, Label, ReviewLock
from tests.factories.review import category_make, item_make, user_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def item(source):
    category = category_make("Edits the wrong file", status="confirmed")
    return item_make(source, category=category)


def every_view(item):
    """(method, url, data) for each review view, with input a permitted user could send."""
    return [
        ("get", f"/items/{item.id}/", None),
        ("post", f"/items/{item.id}/", {"verdict": "not_failure", "split": "none"}),
        ("get", f"/items/{item.id}/similar", None),
        ("get", "/review/", None),
        ("get", "/review/next?category=unassigned", None),
        ("post", "/review/skip", {"item": str(item.id), "category": "unassigned"}),
        ("get", "/agreement/", None),
        ("post", "/agreement/sample", {"count": "5"}),
    ]


def nothing_written() -> bool:
    return not (
        Label.objects.exists()
        or ReviewLock.objects.exists()
        or DoubleReview.objects.exists()
        or AuditEvent.objects.exists()
    )


def test_anonymous_visitors_are_sent_to_the_login_page_from_every_view(client, item):
    for method, url, data in every_view(item):
        response = getattr(client, method)(url, data) if data else getattr(client, method)(url)
        assert response.status_code == 302, url
        assert response.url.startswith("/login/?next="), url
    assert nothing_written()


def test_a_logged_in_user_without_a_role_gets_403_from_every_view(client, item, no_role_user):
    client.force_login(no_role_user)
    for method, url, data in every_view(item):
        response = getattr(client, method)(url, data) if data else getattr(client, method)(url)
        assert response.status_code == 403, url
    assert nothing_written()


def test_a_reviewer_opens_every_reviewer_page(client, item, reviewer):
    client.force_login(reviewer)
    for url in (f"/items/{item.id}/", f"/items/{item.id}/similar", "/review/", "/agreement/"):
        assert client.get(url).status_code == 200, url


def test_a_reviewer_labels_takes_work_and_skips(client, item, reviewer):
    client.force_login(reviewer)
    response = client.post(f"/items/{item.id}/", {"verdict": "not_failure", "split": "none"})
    assert response.status_code == 302
    assert Label.objects.filter(item=item, reviewer=reviewer).exists()
    response = client.get("/review/next?category=unassigned")
    assert response.status_code == 302
    response = client.post("/review/skip", {"item": str(item.id), "category": "unassigned"})
    assert response.status_code == 302


def test_a_reviewer_may_not_request_double_review(client, item, reviewer):
    Label.objects.create(item=item, reviewer=user_make("other", "reviewer"), verdict="failure")
    client.force_login(reviewer)
    response = client.post("/agreement/sample", {"count": "5"})
    assert response.status_code == 403
    assert not DoubleReview.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_reviewer_sees_the_agreement_page_without_the_request_form(client, reviewer):
    client.force_login(reviewer)
    response = client.get("/agreement/")
    assert response.status_code == 200
    assert b"Reviewer agreement" in response.content
    assert b"Request double review" not in response.content


def test_an_admin_sees_the_request_form_and_may_request_double_review(client, item, admin_user):
    Label.objects.create(item=item, reviewer=user_make("other", "reviewer"), verdict="failure")
    client.force_login(admin_user)
    assert b"Request double review" in client.get("/agreement/").content
    response = client.post("/agreement/sample", {"count": "5"}, follow=True)
    assert response.status_code == 200
    assert DoubleReview.objects.filter(item=item, requested_by=admin_user).exists()
    assert "Only 1 labelled items were left" in response.content.decode()


def test_an_admin_also_reviews(client, item, admin_user):
    client.force_login(admin_user)
    assert client.get(f"/items/{item.id}/").status_code == 200
    response = client.post(f"/items/{item.id}/", {"verdict": "spam", "split": "none"})
    assert response.status_code == 302
    assert Label.objects.get(item=item).reviewer == admin_user


def test_the_agreement_sample_answers_only_post(client, admin_user):
    client.force_login(admin_user)
    assert client.get("/agreement/sample").status_code == 405


def test_an_unknown_item_is_a_404(client, reviewer):
    client.force_login(reviewer)
    assert client.get("/items/999999/").status_code == 404
