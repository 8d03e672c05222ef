"""Sources add their own scrub patterns in the admin; every derived view of a signal applies them."""

import html
import json

import pyarrow.parquet as pq
import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from exports.models import DatasetVersion
from feedback import custom_patterns, services, vector_index
from feedback import pipeline
from feedback.models import FeedbackItem, Source
from tests.factories import exports as export_helpers
from tests.factories import client_for, user_make
from tests.factories.review import category_make, unit_vector
from tests.factories.review import item_make as review_item_make

pytestmark = pytest.mark.django_db

HOST = "db7.corp.acme.internal"
TICKET = "ACME-48213"
PATTERNS = [
    {"name": "hostname", "regex": r"[a-z0-9-]+\.corp\.acme\.internal"},
    {"name": "ticket", "regex": r"ACME-\d{5}"},
]
COMMENT = f"It ran the migration on {HOST} while I was on ticket {TICKET}."


@pytest.fixture(autouse=True)
def fresh_vector_index(monkeypatch):
    monkeypatch.setattr(vector_index, "_index", vector_index.VectorIndex())


@pytest.fixture
def acme():
    source, _ = services.source_create(name="acme")
    source.scrub_patterns = PATTERNS
    source.full_clean()
    source.save()
    return source


@pytest.fixture
def other():
    return services.source_create(name="other")[0]


@pytest.fixture
def reviewer_client():
    return client_for(user_make("rita", "reviewer"))


# --- The admin -------------------------------------------------------------------------


def admin_form(source: Source, patterns: str) -> dict:
    return {
        "name": source.name,
        "slug": source.slug,
        "kind": source.kind,
        "signing_secret": source.signing_secret,
        "previous_signing_secret": source.previous_signing_secret,
        "trust_weight": source.trust_weight,
        "is_active": "on",
        "created_at_0": source.created_at.strftime("%Y-%m-%d"),
        "created_at_1": source.created_at.strftime("%H:%M:%S"),
        "scrub_patterns": patterns,
    }


def test_an_admin_adds_patterns_as_name_equals_regex_lines(admin_client, other):
    lines = "hostname = [a-z0-9-]+\\.corp\\.acme\\.internal\n\nticket = ACME-\\d{5}\n"
    response = admin_client.post(f"/admin/feedback/source/{other.id}/change/", admin_form(other, lines))

    assert response.status_code == 302, response.content.decode()[:2000]
    other.refresh_from_db()
    assert other.scrub_patterns == PATTERNS
    page = admin_client.get(f"/admin/feedback/source/{other.id}/change/").content.decode()
    assert "ticket = ACME-\\d{5}" in page


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("hostname = [a-z", "not a valid regular expression"),
        ("anything = x*", "matches the empty string"),
        ("just a regex", "Line 1: write it as `name = regex`"),
        ("host name = abc", "use 1-64 letters, digits"),
        ("host = abc\nhost = def", "named twice"),
        # It would hit the data an export writes as is, and so fail every export's self-check.
        ("dob = \\d{4}-\\d{2}-\\d{2}", "matches '2026-11-30', a value exports write as data"),
        ("customer = \\b\\d{6}\\b", "matches '123456'"),
        ("team = acme", "matches 'acme'"),
    ],
)
def test_a_bad_pattern_is_refused_with_its_reason_and_the_saved_ones_stay(admin_client, acme, lines, message):
    response = admin_client.post(f"/admin/feedback/source/{acme.id}/change/", admin_form(acme, lines))

    assert response.status_code == 200
    assert message in html.unescape(response.content.decode())
    acme.refresh_from_db()
    assert acme.scrub_patterns == PATTERNS


def test_reviewers_cannot_reach_the_source_admin(reviewer_client, acme):
    response = reviewer_client.post(f"/admin/feedback/source/{acme.id}/change/", admin_form(acme, "x = y"))

    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    acme.refresh_from_db()
    assert acme.scrub_patterns == PATTERNS


@pytest.mark.parametrize("stored", [{"hostname": "x"}, [["hostname", "x"]], [{"name": "h"}], "x"])
def test_the_model_refuses_patterns_that_are_not_name_regex_objects(other, stored):
    other.scrub_patterns = stored
    with pytest.raises(ValidationError, match="name"):
        other.full_clean()


# --- Where the patterns apply ---------------------------------------------------------------


@pytest.mark.slow
def test_embedded_text_applies_every_sources_patterns(acme, other):
    mine = review_item_make(acme, comment=COMMENT, status=FeedbackItem.Status.RECEIVED)
    theirs = review_item_make(other, comment=COMMENT, status=FeedbackItem.Status.RECEIVED)

    pipeline.items_embed(item_ids=[mine.id, theirs.id])

    mine.refresh_from_db()
    theirs.refresh_from_db()
    for item in (mine, theirs):  # acme's host name is no less private in another source's text
        assert HOST not in item.embed_text and TICKET not in item.embed_text
        assert "[CUSTOM:hostname]" in item.embed_text and "[CUSTOM:ticket]" in item.embed_text
    assert mine.comment == COMMENT  # the record as received is kept


def test_the_item_page_shows_custom_placeholders_and_the_reveal_shows_the_original(reviewer_client, acme):
    item = review_item_make(acme, comment=COMMENT, context={"metadata": {"host": HOST}})

    page = reviewer_client.get(f"/items/{item.id}/").content.decode()
    assert HOST not in page and TICKET not in page
    assert "[CUSTOM:hostname]" in page and "[CUSTOM:ticket]" in page

    revealed = reviewer_client.post(f"/items/{item.id}/reveal").content.decode()
    assert HOST in revealed


def test_lists_show_scrubbed_snippets_with_every_sources_patterns(reviewer_client, acme, other):
    category = category_make("Migrations", centroid=unit_vector(1))
    mine = review_item_make(acme, comment=COMMENT, category=category, vector=unit_vector(1))
    review_item_make(other, comment=f"mailed jane.doe@acme-corp.com from {HOST}", category=category, vector=unit_vector(2))
    category.representative_ids = [mine.id]
    category.save()

    # Each count includes reading the patterns once (they are kept for seconds otherwise).
    custom_patterns.forget()
    with CaptureQueriesContext(connection) as search_queries:
        search = reviewer_client.get("/search/").content.decode()
    custom_patterns.forget()
    with CaptureQueriesContext(connection) as category_queries:
        category_page = reviewer_client.get(f"/categories/{category.id}/").content.decode()

    assert f"/items/{mine.id}/" in search
    for page in (search, category_page):
        assert TICKET not in page and "[CUSTOM:ticket]" in page
        assert "jane.doe@acme-corp.com" not in page
    assert "[EMAIL]" in category_page
    # The other source declared no patterns; acme's apply to its text too.
    assert HOST not in category_page and category_page.count("[CUSTOM:hostname]") == 3  # two rows + representative

    # The patterns are read once, not per row: thirty more rows cost no more queries.
    for _ in range(15):
        review_item_make(acme, comment=COMMENT, category=category)
        review_item_make(other, comment=COMMENT, category=category)
    for url, before in (("/search/", search_queries), (f"/categories/{category.id}/", category_queries)):
        custom_patterns.forget()
        with CaptureQueriesContext(connection) as after:
            reviewer_client.get(url)
        assert len(after) == len(before), url


def test_every_export_format_applies_every_sources_patterns(export_root, no_broker, acme, other):
    export_helpers.item_make(source=acme, comment=COMMENT)
    export_helpers.item_make(source=other, comment=f"It deployed to {HOST}.", output=f"Connected to {HOST}")
    formats = ("chat_jsonl", "preference_jsonl", "hints_jsonl", "eval_jsonl", "csv", "parquet")

    version = export_helpers.export(export_helpers.dataset_make("private", formats=formats))

    folder = export_root / "private" / "v1"
    for path in folder.iterdir():
        text = (
            json.dumps(pq.read_table(path).to_pylist(), default=str)
            if path.suffix == ".parquet"
            else path.read_text(encoding="utf-8")
        )
        assert HOST not in text and TICKET not in text, path.name
    assert "[CUSTOM:hostname]" in (folder / "items.csv").read_text()
    assert version.manifest["scrubbed"]["CUSTOM:hostname"] >= 3
    assert version.manifest["scrubbed"]["CUSTOM:ticket"] >= 1


def test_the_export_self_check_knows_the_custom_patterns(export_root, no_broker, acme, monkeypatch):
    from exports import records, runs, writing
    from exports.models import Trigger

    export_helpers.item_make(source=acme, comment=f"It ran on {HOST}.")
    # Stand in for a scrubber bug that forgets the source's patterns.
    scrub_record = records.scrub_record
    monkeypatch.setattr(records, "scrub_record", lambda record, **kwargs: scrub_record(record))
    dataset = export_helpers.dataset_make("leaky", formats=("csv",))

    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)
    with pytest.raises(writing.UnscrubbedOutput, match="custom:hostname"):
        runs.export_run_execute(run_id=run.id)
    assert DatasetVersion.objects.count() == 0


def test_a_pattern_saved_in_the_admin_applies_at_once_and_other_processes_catch_up(admin_client, other, monkeypatch):
    item = review_item_make(other, comment=COMMENT)
    assert HOST in admin_client.get(f"/items/{item.id}/").content.decode()

    admin_client.post(f"/admin/feedback/source/{other.id}/change/", admin_form(other, "host = [a-z0-9]+\\.corp\\.acme\\.internal"))
    assert HOST not in admin_client.get(f"/items/{item.id}/").content.decode()  # the save cleared this process's copy

    # A change made elsewhere (no signal here) shows once the kept copy is older than MAX_AGE_SECONDS.
    Source.objects.filter(id=other.id).update(scrub_patterns=[])
    assert custom_patterns.all_sources() != ()
    clock = custom_patterns.time.monotonic() + custom_patterns.MAX_AGE_SECONDS + 1
    monkeypatch.setattr(custom_patterns.time, "monotonic", lambda: clock)
    assert custom_patterns.all_sources() == ()
