"""Schemathesis fuzzes every operation of /api/openapi.json on a live server.

Each operation is one test: first Schemathesis' coverage phase (boundary,
missing and wrongly typed values), then a bounded, reproducible run of
generated requests, valid and invalid. Every answer must keep the documented
contract: no 5xx, a documented status code and content type, and a body that
matches the declared schema. A mismatch is fixed in the API (declare the
answer in the route), not silenced here: that is what this test is for.

The requests reach past 401. Each generated request names its caller in an
``X-Fuzz-Caller`` header, drawn like the rest of the request: an API token, an
admin's session (cookie plus CSRF token, as a browser sends them) or nobody;
the credentials are added when it is sent. Webhook bodies are signed with the
source's secret, and path and query values are steered now and then onto the
seeded objects, so the fuzz meets real datasets, versions, files and a real
comparison, not only 404s.

At the end, short tests pin what the fuzz found, so a fix cannot quietly
come undone when the generated examples change.
"""

import json
import time
import uuid
import zlib
from dataclasses import dataclass
from datetime import date

import hypothesis
import hypothesis.strategies as st
import pytest
import requests
import schemathesis
from django.test import Client
from hypothesis import HealthCheck
from schemathesis.config import SchemathesisConfig

from exports.models import ExportRun
from feedback import services as feedback_services
from feedback.models import ApiToken
from feedback.signatures import sign
from labeling.models import Category
from tests.factories.compare import add_items
from tests.factories.exports import dataset_make, export, item_make
from tests.factories import source_make, user_make

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EVENTS_PATH = "/api/v1/sources/{slug}/events"
COMPARE_PATH = "/api/v1/compare"
REPORTS_PATH = "/api/v1/reports"
CALLER_HEADER = "X-Fuzz-Caller"
CALLERS = ("token", "admin session", "nobody")
START = date(2026, 11, 2)

CONFIG = SchemathesisConfig.from_dict(
    {
        # Examples (none are declared yet), coverage, fuzzing: every phase a pytest run has.
        "phases": {"examples": {"enabled": True}, "coverage": {"enabled": True}, "fuzzing": {"enabled": True}},
        "generation": {"mode": "all"},  # valid and invalid requests
        "checks": {
            # Schema-valid input may still break a rule the schema cannot state (a
            # value nested too deep to store, a dataset's name must be free): design.md answers that with 422, which every route documents.
            # Any other refusal of valid input (400, 413) still fails.
            "positive_data_acceptance": {"expected-statuses": ["2xx", "3xx", 401, 403, 404, 409, 422, 429]},
        },
    }
)


def published_document() -> dict:
    """/api/openapi.json as the app serves it, read through Django's own URL routing.

    It is read at collection time so that each operation becomes its own test;
    the first test checks that the live server publishes the very same
    document. (schemathesis.pytest.from_fixture, which would load it from the
    live server itself, fails on pytest 9.2: it renames items through
    ``Node._nodeid``, which pytest 9.2 no longer has.)
    """
    return Client().get("/api/openapi.json").json()


DOCUMENT = published_document()
schema = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG)


@dataclass
class World:
    """The seeded objects the fuzz aims at, and the callers' credentials."""

    token: str
    source_slug: str
    secret: str
    session_id: str
    csrf: str
    dataset_ids: list[int]
    version: tuple[int, int]
    file_names: list[str]
    run_id: int


# The world of the running test. Generation reads it when it draws a value, so
# strategies built at collection time can aim at rows seeded afterwards.
AIM: dict[str, World] = {}


@pytest.fixture
def nothing_queued(monkeypatch):
    # No worker runs here: queued work would only pile up in the broker (Redis
    # in CI, where later tests start real workers). Runs stay queued, so a
    # second export of the same dataset meets the documented 409.
    monkeypatch.setattr("exports.tasks.export_run.apply_async", lambda *args, **kwargs: None)
    monkeypatch.setattr("feedback.tasks.embed_items.apply_async", lambda *args, **kwargs: None)


@pytest.fixture
def world(live_server, settings, tmp_path, nothing_queued):
    settings.EXPORT_ROOT = tmp_path / "exports"
    source, secret = source_make("fuzz")
    # Every scope, so that the token reaches every operation.
    _, token = feedback_services.api_token_create(source=source, name="fuzz", scopes=ApiToken.Scope.values)
    category = Category.objects.create(name="Edits the wrong file", status=Category.Status.CONFIRMED)
    for version in ("2.1", "2.2"):
        add_items(source, version=version, n=6, category=category)
        add_items(source, version=version, n=6, rating=1)
    for n in range(3):
        item_make(source=source, comment=f"It edited the wrong file ({n}).")
    dataset = dataset_make("fuzz-train", formats=("csv", "chat_jsonl"), filters={"rating": "down"})
    version = export(dataset)
    other = dataset_make("fuzz-eval", purpose="eval")

    admin = user_make("fuzz-admin", "admin")
    browser = Client()
    browser.force_login(admin)
    # The CSRF cookie as the login page hands it to a browser.
    csrf = requests.get(f"{live_server.url}/login/", timeout=10).cookies["csrftoken"]
    AIM["world"] = World(
        token=token,
        source_slug=source.slug,
        secret=secret,
        session_id=browser.cookies["sessionid"].value,
        csrf=csrf,
        dataset_ids=[dataset.id, other.id],
        version=(dataset.id, version.number),
        file_names=version.file_names(),
        run_id=ExportRun.objects.get(dataset=dataset).id,
    )
    yield AIM["world"]
    AIM.clear()


def aim_path(case, which: int) -> None:
    """Path values that name seeded objects: the source, a dataset, its version, a file, a run."""
    world = AIM["world"]
    path = case.path_parameters if isinstance(case.path_parameters, dict) else None
    if not path:
        return
    if "slug" in path:
        path["slug"] = world.source_slug
    if "dataset_id" in path:
        path["dataset_id"] = world.dataset_ids[which % len(world.dataset_ids)]
    if "number" in path:
        path["dataset_id"], path["number"] = world.version
    if "name" in path:
        path["name"] = world.file_names[which % len(world.file_names)]
    if "run_id" in path:
        path["dataset_id"], path["run_id"] = world.version[0], world.run_id
    case.path_parameters = path


def aim_comparison(case, which: int) -> None:
    """A query that compares the seeded versions, as JSON or CSV."""
    query = case.query if isinstance(case.query, dict) else {}
    sides = (("2.1", "2.2"), ("2.1:A", "2.2:A"))[which % 2]
    query.update({"a": sides[0], "b": sides[1], "from": str(START), "to": "2026-11-20"})
    query["format"] = ("json", "csv")[which // 2 % 2]
    case.query = query


@schema.hook
def flatmap_case(context, case):
    def aimed(choice: dict):
        case.headers = {**(case.headers or {}), CALLER_HEADER: choice["caller"]}
        if choice["real"]:
            aim_path(case, choice["which"])
            if case.operation.path == COMPARE_PATH:
                aim_comparison(case, choice["which"])
        return case

    return st.fixed_dictionaries(
        {"caller": st.sampled_from(CALLERS), "real": st.booleans(), "which": st.integers(0, 5)}
    ).map(aimed)


def fingerprint(case) -> int:
    """A stable number for a coverage-phase case, which is built before any draw."""
    content = json.dumps([case.path_parameters, case.query, case.body], sort_keys=True, default=repr)
    return zlib.crc32(content.encode())


def aim_coverage_case(case) -> None:
    """A coverage-phase case about the query or the body gets real path values.

    Otherwise nearly all of them stop at a 404 for a made-up id or slug, and
    their boundary and wrongly typed values never reach the validation.
    """
    if case.meta is None or case.meta.phase.name.value != "coverage":
        return
    location = getattr(case.meta.phase.data, "parameter_location", None)
    if location is not None and location.value != "path":
        aim_path(case, fingerprint(case))


def caller_of(case) -> str:
    """The drawn caller; a coverage-phase case (built before any draw) gets a fixed one."""
    drawn = (case.headers or {}).get(CALLER_HEADER)
    if drawn:
        return drawn
    if case.operation.path == REPORTS_PATH:
        return "token"  # only tokens file reports through the API; people use the form
    return CALLERS[fingerprint(case) % 2]


def credentials(caller: str, world: World) -> tuple[dict, dict]:
    if caller == "token":
        return {"Authorization": f"Bearer {world.token}"}, {}
    if caller == "admin session":
        return {"X-CSRFToken": world.csrf}, {"sessionid": world.session_id, "csrftoken": world.csrf}
    return {}, {}


def signed(case, world: World) -> tuple[dict, dict]:
    """For the webhook: the JSON body as bytes, and its Standard Webhooks signature headers."""
    if not (case.media_type or "").endswith("json"):
        return {}, {}
    try:
        body = json.dumps(case.body).encode()
    except (TypeError, ValueError):
        return {}, {}
    # The message id is sent as a header: a sender could not put an id with
    # control or non-Latin-1 characters there, so such events get a fresh one.
    event_id = case.body.get("id") if isinstance(case.body, dict) and "events" not in case.body else None
    sendable = isinstance(event_id, str) and event_id.isascii() and event_id.isprintable()
    msg_id = event_id if sendable and event_id == event_id.strip() else f"msg_{uuid.uuid4().hex}"
    timestamp = int(time.time())
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret=world.secret, msg_id=msg_id, timestamp=timestamp, body=body),
        "Content-Type": case.media_type,
    }
    return headers, {"data": body}


def test_the_live_server_publishes_the_document_being_fuzzed(live_server):
    assert requests.get(f"{live_server.url}/api/openapi.json", timeout=10).json() == DOCUMENT


@hypothesis.settings(
    max_examples=25,
    deadline=None,
    derandomize=True,  # the same examples on every run, so CI is reproducible
    database=None,  # nothing kept between runs: a failure replays from derandomize alone
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@schema.parametrize()
def test_every_operation_keeps_its_documented_contract(case, live_server, world):
    caller = caller_of(case)
    aim_coverage_case(case)
    if case.operation.path != EVENTS_PATH:
        headers, cookies = credentials(caller, world)
        extra: dict = {}
    elif caller != "nobody":
        # A webhook sender signs with the source's secret instead of logging in.
        (headers, extra), cookies = signed(case, world), {}
    else:
        headers, cookies, extra = {}, {}, {}
    case.call_and_validate(base_url=live_server.url, headers=headers, cookies=cookies, timeout=30, **extra)


# --- What the fuzz found, pinned: each of these was a 500 or a schema mismatch ------------


@pytest.fixture
def token_api(client):
    source, _ = source_make("pinned")
    _, token = feedback_services.api_token_create(source=source, scopes=ApiToken.Scope.values)
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


REPORT = {"title": "It deleted my tests", "what_happened": "Asked for a rename; it removed tests/."}


@pytest.mark.django_db
def test_a_nul_character_is_refused_with_its_field_before_postgresql_sees_it(client, token_api):
    body = json.dumps({**REPORT, "context": {"note": "a\u0000b"}})
    response = client.post("/api/v1/reports", body, content_type="application/json", **token_api)
    assert response.status_code == 422
    assert response.json()["field"] == "context.note"


@pytest.mark.django_db
def test_a_model_version_wider_than_its_column_is_refused(client, token_api):
    body = json.dumps({**REPORT, "model_version": "9" * 101})
    response = client.post("/api/v1/reports", body, content_type="application/json", **token_api)
    assert (response.status_code, response.json()["field"]) == (422, "model_version")


@pytest.mark.django_db
def test_a_category_id_beyond_64_bits_is_refused(client, token_api):
    body = json.dumps({"name": "wide", "purpose": "train", "formats": ["csv"], "filters": {"categories": [2**64]}})
    response = client.post("/api/v1/datasets", body, content_type="application/json", **token_api)
    assert (response.status_code, response.json()["field"]) == (422, "filters.categories[0]")


@pytest.mark.django_db
def test_a_session_posting_multipart_gets_a_json_400_not_a_500(settings, tmp_path, nothing_queued):
    settings.EXPORT_ROOT = tmp_path
    dataset = dataset_make("forms")
    client = Client(enforce_csrf_checks=True)  # the check that parses the form, and used to fail
    client.get("/login/")
    client.force_login(user_make("poster", "admin"))
    headers = {"X-CSRFToken": client.cookies["csrftoken"].value}
    url = f"/api/v1/datasets/{dataset.id}/exports"
    form = b'--xyz\r\nContent-Disposition: form-data; name="mode"\r\n\r\nsnapshot\r\n--xyz--\r\n'
    for content_type, body in [("multipart/form-data", b"{}"), ("multipart/form-data; boundary=xyz", form)]:
        response = client.post(url, body, content_type=content_type, headers=headers)
        assert response.status_code == 400 and response.json()["error"], (content_type, response.content)


def test_the_export_route_documents_its_body_as_optional():
    assert DOCUMENT["paths"]["/api/v1/datasets/{dataset_id}/exports"]["post"]["requestBody"]["required"] is False
