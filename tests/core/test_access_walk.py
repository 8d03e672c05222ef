"""Walk every route as each kind of caller: only what the role allows succeeds.

Routes are read from the URL configuration, so a new page is walked without
being listed here; a route this file does not know how to fill fails the test.
"""

import json
import re
import uuid

import pytest
from django.test import Client
from django.urls import URLResolver, get_resolver
from django.utils import timezone

from exports.models import Dataset
from feedback import services
from feedback.models import ApiToken, FeedbackItem
from feedback.signatures import sign
from labeling.models import Area, BulkAction, Category, ClusterRun, SavedComparison
from notifications import services as notification_services
from notifications.models import Delivery, Event, Notification
from rollouts.models import RolloutFlag
from tests.factories import (
    client_for,
    post_signed,
    rating_event,
    signed_headers,
    source_make,
    user_make,
)

pytestmark = pytest.mark.django_db

PUBLIC = {"login", "logout", "openapi-json", "openapi-view", "api-root", "favicon"}
SIGNED = {"receive_events"}  # Standard Webhooks signature instead of a login
ADMIN_ONLY = {"category_delete", "dataset_schedule", "dataset_delete", "agreement_sample"}
# The import pages (feedback/imports/views.py), notifications, a source's rollout settings.
ADMIN_ONLY |= {"imports", "import_run", "import_run_status", "rollout_source_settings"}
ADMIN_ONLY |= {
    "notifications",
    "notification_destination_new",
    "notification_destination_edit",
    "notification_destination_test",
    "notification_destination_delete",
    "notification_delivery_retry",
}
ANY_LOGGED_IN = {"report_new", "home"}  # home sends people without a role to the report form
TOKEN_REFUSED = {"receive_events"}  # API routes that answer to a signature or a session, never to a bearer token
# What the API's path parameters name: datasets and their runs, versions and files, which belong
# to no source. A token is a source's, so a route naming an item (or anything else a source owns)
# must check the token's source before it joins this set.
API_PATH_PARAMETERS = {"dataset_id", "run_id", "number", "name", "action_id"}
WRONG_SIGNATURE = {"error": "webhook-signature does not match the body and a current secret of this source"}


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
    destination, _ = notification_services.destination_create(
        name="d", kind="slack", url="https://hooks.example/x", events=[Event.values[0]]
    )
    item = FeedbackItem.objects.create(
        source=source, external_id="x", kind="rating", rating=-1, occurred_at=timezone.now(), receipt_id=uuid.uuid4()
    )
    return {
        "slug": source.slug,
        "item_id": item.id,
        "category_id": Category.objects.create(name="c").id,
        "area_id": Area.objects.create(name="a").id,
        "run_id": ClusterRun.objects.create(trigger="command", active=None, status="done").id,
        "dataset_id": Dataset.objects.create(name="d", purpose="train").id,
        "saved_id": SavedComparison.objects.create(a_version="1", b_version="2").id,
        "action_id": BulkAction.objects.create(kind=BulkAction.Kind.values[0]).id,
        "flag_id": RolloutFlag.objects.create(item=item, check_name="vcs_history", location="tool_calls").id,
        "destination_id": destination.id,
        "delivery_id": Delivery.objects.create(
            notification=Notification.objects.create(event=Event.values[0], msg_id="msg_x", summary="s", text="t"),
            destination=destination,
        ).id,
        "number": 1,
        "name": "items.csv",
    }


def fill(route: str, objects: dict) -> str:
    path = "/" + route
    for key, value in objects.items():
        for converter in ("int:", "str:", "slug:", ""):
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


# --- Another source's credentials ---------------------------------------------------


def signed_request(client, method: str, path: str, secret: str | None):
    """A request with no session, carrying a current Standard Webhooks signature by ``secret`` (none for None)."""
    body = json.dumps(rating_event()).encode() if method == "post" else b""
    headers = signed_headers(secret, body) if secret else {}
    if method == "post":
        return client.post(path, data=body, content_type="application/json", headers=headers)
    return client.get(path, headers=headers)


def test_a_delivery_signed_with_another_sources_secret_is_refused_and_stores_nothing():
    alpha, alpha_secret = source_make("alpha")
    beta, beta_secret = source_make("beta")
    client = Client()
    event = rating_event()
    batch = {"events": [rating_event(), rating_event()]}

    for payload in (event, batch):
        response = post_signed(client, alpha, beta_secret, payload)
        assert response.status_code == 401, response.content
        assert response.json() == WRONG_SIGNATURE
    assert FeedbackItem.objects.count() == 0

    # The same delivery signed with alpha's own secret is stored: the refusal was the secret's doing.
    assert post_signed(client, alpha, alpha_secret, event).status_code == 202
    assert list(FeedbackItem.objects.values_list("source__slug", "external_id")) == [("alpha", event["id"])]
    assert not FeedbackItem.objects.filter(source=beta).exists()


def test_another_sources_previous_secret_is_refused_while_it_still_works_for_that_source():
    alpha, alpha_secret = source_make("alpha")
    beta, beta_old_secret = source_make("beta")
    services.source_rotate_secret(source=alpha)  # alpha also has a previous secret: neither of beta's may pass
    beta_new_secret = services.source_rotate_secret(source=beta)
    beta.refresh_from_db()
    assert beta.previous_signing_secret == beta_old_secret
    client = Client()

    response = post_signed(client, alpha, beta_old_secret, rating_event())
    assert response.status_code == 401
    assert response.json() == WRONG_SIGNATURE

    # A rotating sender signs with both of its secrets; both of beta's together are still not alpha's.
    body = json.dumps(rating_event(id="evt_both")).encode()
    headers = signed_headers(beta_new_secret, body, msg_id="evt_both")
    old = sign(secret=beta_old_secret, msg_id="evt_both", timestamp=headers["webhook-timestamp"], body=body)
    headers["webhook-signature"] += " " + old
    response = client.post(
        f"/api/v1/sources/{alpha.slug}/events", data=body, content_type="application/json", headers=headers
    )
    assert response.status_code == 401
    assert response.json() == WRONG_SIGNATURE
    assert FeedbackItem.objects.count() == 0

    # Beta's old secret is live for beta itself, so the refusal above was about whose secret it is.
    assert post_signed(client, beta, beta_old_secret, rating_event(id="evt_beta")).status_code == 202
    assert not FeedbackItem.objects.filter(source=alpha).exists()
    assert FeedbackItem.objects.get().source == beta


def test_another_sources_signature_opens_no_more_than_an_anonymous_request(objects):
    _, other_secret = source_make("other")  # the objects fixture's source is "product": its URL is walked
    before = FeedbackItem.objects.count()
    client = Client()
    for route, name in routes():
        if name in PUBLIC:
            continue
        for method, path in requests_for(route, objects):
            signed = signed_request(client, method, path, other_secret)
            anonymous = signed_request(client, method, path, secret=None)
            assert signed.status_code == anonymous.status_code, (method, path, signed.status_code)
            if signed.status_code == 302:
                assert signed.url.startswith("/login/"), (method, path, signed.url)
            if name in SIGNED and method == "post":
                assert signed.json() == WRONG_SIGNATURE, (method, path)
    assert FeedbackItem.objects.count() == before


def test_a_valid_token_opens_the_token_api_and_no_page(objects):
    source, _ = source_make("tokens")  # not the source of the objects walked: tokens are not scoped per source
    _, raw = services.api_token_create(source=source, scopes=ApiToken.Scope.values)
    client = Client(headers={"Authorization": f"Bearer {raw}"})
    for route, name in routes():
        if name in PUBLIC:
            continue
        for method, path in requests_for(route, objects):
            response = client.post(path, content_type="application/json") if method == "post" else client.get(path)
            if not path.startswith("/api/"):
                # A token is a machine, not a login: pages see an anonymous caller.
                assert response.status_code in (302, 405), (method, path, response.status_code)
                if response.status_code == 302:
                    assert response.url.startswith("/login/"), (method, path, response.url)
            elif name in TOKEN_REFUSED:
                assert response.status_code in (401, 405), (method, path, response.status_code)
            elif "/bulk-actions/" in path:
                # The bulk action walked was made by a person, not by this token: only they or an admin undo it.
                assert response.status_code in (403, 405), (method, path, response.status_code)
            else:
                # Reached: an answer, a missing object or a body that wants fields; never refused or broken.
                assert response.status_code in (200, 202, 404, 405, 422), (method, path, response.status_code)
    # A token carries no role, so the admin-only schedule is refused through the API too.
    schedule = {"schedule": {"cron": "0 3 * * *", "mode": "snapshot"}}
    dataset_path = f"/api/v1/datasets/{objects['dataset_id']}"
    assert client.patch(dataset_path, schedule, content_type="application/json").status_code == 403
    spec = {"name": "scheduled", "purpose": "train", "formats": ["csv"], **schedule}
    response = client.post("/api/v1/datasets", spec, content_type="application/json")
    assert response.status_code == 403
    response = client.post("/api/v1/datasets", {**spec, "schedule": None}, content_type="application/json")
    assert response.status_code == 201  # the same dataset without a schedule: the refusal was the schedule's
    assert Dataset.objects.get(id=objects["dataset_id"]).schedule_cron == ""


@pytest.mark.parametrize("scope", ApiToken.Scope.values)
def test_a_token_opens_only_the_api_routes_of_its_scope(objects, scope):
    source, _ = source_make("tokens")
    _, raw = services.api_token_create(source=source, scopes=[scope])
    client = Client(headers={"Authorization": f"Bearer {raw}"})
    before = (FeedbackItem.objects.count(), Dataset.objects.count())
    opened = set()
    for route, name in routes():
        if not route.startswith("api/") or name in PUBLIC | SIGNED:
            continue
        for method, path in requests_for(route, objects):
            response = client.post(path, content_type="application/json") if method == "post" else client.get(path)
            if response.status_code == 405:
                continue
            route_scope = (
                "reports" if "/reports" in path
                else "compare" if "/compare" in path
                else "review" if "/bulk-actions" in path
                else "datasets"
            )
            if route_scope == scope:
                if "/bulk-actions/" not in path:  # another's bulk action: refused for its author's sake (above)
                    assert response.status_code != 403, (method, path)
                opened.add(path)
            else:
                assert response.status_code == 403, (method, path, response.status_code)
                assert f"may not use the {route_scope} API (it has: {scope})" in response.json()["error"]
    assert opened, scope
    if scope != "datasets":
        assert Dataset.objects.count() == before[1]


def test_a_token_files_reports_for_its_own_source_only():
    alpha, _ = source_make("alpha")
    beta, _ = source_make("beta")
    _, alpha_raw = services.api_token_create(source=alpha)
    _, beta_raw = services.api_token_create(source=beta)
    report = {"id": "rep-1", "title": "Wrong file", "what_happened": "It edited main.py."}

    def file(raw, payload):
        return Client().post(
            "/api/v1/reports", payload, content_type="application/json", headers={"Authorization": f"Bearer {raw}"}
        )

    # Naming the other source in the body changes nothing: the token decides whose report it is.
    response = file(alpha_raw, {**report, "source": beta.slug, "source_id": beta.id})
    assert response.status_code == 201
    alpha_item = FeedbackItem.objects.get(id=response.json()["id"])
    assert alpha_item.source == alpha
    assert not FeedbackItem.objects.filter(source=beta).exists()

    # Idempotency keys are per source: beta reusing alpha's id files its own report and learns nothing of alpha's.
    response = file(beta_raw, report)
    assert response.status_code == 201
    assert response.json()["duplicate"] is False
    assert response.json()["id"] != alpha_item.id
    assert FeedbackItem.objects.get(id=response.json()["id"]).source == beta
    response = file(alpha_raw, report)
    assert response.status_code == 200
    assert (response.json()["id"], response.json()["duplicate"]) == (alpha_item.id, True)
    assert FeedbackItem.objects.count() == 2


def test_no_api_route_names_an_object_a_source_owns():
    for route, name in routes():
        if not route.startswith("api/") or name in SIGNED:
            continue
        parameters = set(re.findall(r"<(?:\w+:)?(\w+)>", route))
        assert parameters <= API_PATH_PARAMETERS, (
            f"{route} takes {parameters - API_PATH_PARAMETERS}: if a source owns it, refuse another source's "
            "token there and walk it in this file, then add the parameter to API_PATH_PARAMETERS"
        )
