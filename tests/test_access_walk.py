"""Walk every route as each kind of caller: only what the role allows succeeds.

Routes are read from the URL configuration, so a new page is walked without
being listed here; a route this file does not know how to fill fails the test.
"""

import uuid

import pytest
from django.test import Client
from django.urls import URLResolver, get_resolver
from django.utils import timezone

from exports.models import Dataset
from feedback import services
from feedback.models import FeedbackItem
from labeling.models import Category, ClusterRun, SavedComparison
from tests.factories import client_for, source_make, user_make

pytestmark = pytest.mark.django_db

PUBLIC = {"login", "logout", "openapi-json", "openapi-view", "api-root"}
SIGNED = {"receive_events"}  # Standard Webhooks signature instead of a login
ADMIN_ONLY = {"category_delete", "dataset_schedule", "dataset_delete", "agreement_sample"}
ANY_LOGGED_IN = {"report_new", "home"}  # home sends people without a role to the report form


def routes():
    def walk(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if str(pattern.pattern).startswith("admin/"):
                    continue
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern), pattern.name

    return sorted(set(walk(get_resolver().url_patterns)))


@pytest.fixture
def objects():
    source, _ = source_make()
    item = FeedbackItem.objects.create(
        source=source, external_id="x", kind="rating", rating=-1, occurred_at=timezone.now(), receipt_id=uuid.uuid4()
    )
    return {
        "slug": source.slug,
        "item_id": item.id,
        "category_id": Category.objects.create(name="c").id,
        "run_id": ClusterRun.objects.create(trigger="command", active=None, status="done").id,
        "dataset_id": Dataset.objects.create(name="d", purpose="train").id,
        "saved_id": SavedComparison.objects.create(a_version="1", b_version="2").id,
        "number": 1,
        "name": "items.csv",
    }


def fill(route: str, objects: dict) -> str:
    path = "/" + route
    for key, value in objects.items():
        for converter in ("int:", "str:", ""):
            path = path.replace(f"<{converter}{key}>", str(value))
    assert "<" not in path, f"no value to fill {route}; add it to the objects fixture"
    return path


def requests_for(route, objects):
    path = fill(route, objects)
    return [("get", path), ("post", path)]


def test_anonymous_callers_reach_nothing_but_login_and_the_api_description(objects):
    client = Client()
    for route, name in routes():
        if name in PUBLIC:
            continue
        for method, path in requests_for(route, objects):
            response = getattr(client, method)(path)
            if path.startswith("/api/"):
                assert response.status_code in (401, 405), (method, path, response.status_code)
            else:
                assert response.status_code in (302, 405), (method, path, response.status_code)
                if response.status_code == 302:
                    assert response.url.startswith("/login/"), (method, path, response.url)


def test_staff_without_a_role_may_only_file_reports(objects):
    client = client_for(user_make("norole"))
    for route, name in routes():
        if name in PUBLIC | SIGNED | ANY_LOGGED_IN:
            continue
        for method, path in requests_for(route, objects):
            response = getattr(client, method)(path)
            refused = (401, 403, 405) if path.startswith("/api/") else (403, 405)  # the API knows tokens, not roles
            assert response.status_code in refused, (method, path, response.status_code)
    assert client.get("/reports/new").status_code == 200


def test_reviewers_are_refused_every_admin_action(objects):
    client = client_for(user_make("rev", "reviewer"))
    for route, name in routes():
        if name not in ADMIN_ONLY:
            continue
        path = fill(route, objects)
        response = client.post(path, {"cron": "0 3 * * *", "mode": "full", "size": "5"})
        assert response.status_code == 403, (path, response.status_code)
    assert Category.objects.filter(id=objects["category_id"]).exists()
    assert Dataset.objects.filter(id=objects["dataset_id"]).exists()


def test_reviewers_and_admins_open_every_page(objects):
    for role in ("reviewer", "admin"):
        client = client_for(user_make(f"u-{role}", role))
        for route, name in routes():
            if route.startswith("api/") or name in PUBLIC or (role == "reviewer" and name in ADMIN_ONLY):
                continue
            path = fill(route, objects)
            response = client.get(path)
            # Reached: a page, a redirect, a missing object or a form that wants input; never refused or broken.
            assert response.status_code in (200, 302, 404, 405, 422), (role, path, response.status_code)


def test_a_revoked_token_opens_no_api_route(objects):
    source, _ = source_make("tokens")
    token, raw = services.api_token_create(source=source)
    services.api_token_revoke(token=token)
    client = Client(headers={"Authorization": f"Bearer {raw}"})
    for route, name in routes():
        if not route.startswith("api/") or name in PUBLIC | SIGNED:
            continue
        for method, path in requests_for(route, objects):
            response = getattr(client, method)(path, content_type="application/json") if method == "post" else client.get(path)
            assert response.status_code in (401, 405), (method, path, response.status_code)
