"""The overview page and search: access, figures, filters, bad input."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from feedback.models import FeedbackItem
from feedback.scrubber import scrub
from feedback.text import embeddable_text
from labeling.overview import selectors as overview_selectors
from labeling.models import Assignment, Category
from tests.factories import signed_in, source_make, user_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewer(client):
    return signed_in(client, user_make("rev", "reviewer"))


def item(source, external_id, **fields):
    """A stored item with the scrubbed text the pipeline derives (search reads it)."""
    defaults = dict(kind="rating", rating=-1, occurred_at=timezone.now(), receipt_id=uuid.uuid4())
    made = FeedbackItem(source=source, external_id=external_id, **(defaults | fields))
    made.embed_text = scrub(embeddable_text(made)).text
    made.save()
    return made


@pytest.mark.parametrize("url", ["/", "/search/"])
def test_anonymous_visitors_are_sent_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302 and response.url.startswith("/login/")


def test_staff_without_a_review_role_are_sent_from_the_overview_to_the_report_form(client):
    client.force_login(user_make("u"))
    response = client.get("/")
    assert response.status_code == 302 and response.url == "/reports/new"


def test_staff_without_a_review_role_may_not_search(client):
    client.force_login(user_make("u"))
    response = client.get("/search/?q=secret")
    assert response.status_code == 403
    assert b"This page needs the reviewer role." in response.content


@pytest.mark.parametrize("role", ["reviewer", "admin"])
def test_reviewers_and_admins_see_the_overview_with_versions_and_categories(client, role):
    client.force_login(user_make("u", role))
    source, _ = source_make()
    for i in range(4):
        item(source, f"a{i}", model_version="2.1", rating=-1 if i < 3 else 1)
    Category.objects.create(name="Edits the wrong file", size=3, status=Category.Status.CONFIRMED)
    response = client.get("/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "Edits the wrong file" in body
    assert "75%" in body  # 3 of 4 ratings of 2.1 were thumbs-down
    assert 'id="chart-data"' in body


def test_the_daily_volume_of_a_version_is_empty_outside_the_days_it_was_live():
    source, _ = source_make()
    now = timezone.now()
    for days_ago, version in [(9, "2.0"), (7, "2.0"), (3, "2.1"), (0, "2.1")]:
        item(source, f"{version}-{days_ago}", model_version=version, occurred_at=now - timedelta(days=days_ago))

    days, series = overview_selectors.ratings_over_time(days=10, now=now)

    volume = {s.label: s.volume for s in series}
    assert volume["2.0"] == [1, 0, 1] + [None] * 7  # a quiet day while live is a real 0
    assert volume["2.1"] == [None] * 6 + [1, 0, 0, 1]
    assert len(days) == 10


def test_the_overview_reads_a_fixed_number_of_queries_however_many_categories(client, reviewer, django_assert_max_num_queries):
    for i in range(10):
        Category.objects.create(name=f"c{i}", size=i + 1)
    with django_assert_max_num_queries(14):  # the pipeline's health is two reads: statuses passed through, the total
        assert client.get("/").status_code == 200


def test_search_finds_every_word_in_comments_and_reports(client, reviewer):
    source, _ = source_make()
    hit = item(source, "hit", comment="It edited the wrong file in utils.py")
    item(source, "miss", comment="It edited nothing")
    report = item(source, "rep", kind="report", rating=None, title="Wrong file again", comment="see title")
    response = client.get("/search/", {"q": "wrong file"})
    assert response.status_code == 200
    assert {i.id for i in response.context["page"]} == {hit.id, report.id}


def test_search_reads_the_scrubbed_text_so_it_cannot_confirm_a_secret(client, reviewer):
    source, _ = source_make()
    leaky = item(source, "leak", comment="It pushed with ghp_8fK2mQ9xLr4TzW7vN1bC5yH3jD6sA0eP2uGi and mailed jane.doe@acme-corp.com")

    for probe in ("ghp_8fK2", "jane.doe", "acme-corp"):
        response = client.get("/search/", {"q": probe})
        assert list(response.context["page"]) == [], probe
        assert "Nothing matches these filters." in response.content.decode()
    found = client.get("/search/", {"q": "[EMAIL] pushed"})
    assert [i.id for i in found.context["page"]] == [leaky.id]
    assert "jane.doe" not in found.content.decode()


def test_a_thumbs_down_without_a_comment_shows_what_it_was_sorted_by_and_a_commented_one_its_comment(client, reviewer):
    source, _ = source_make()
    context = {"output": "Done. I kept the behaviour unchanged in src/config.py; mail jane.doe@acme-corp.com if it breaks."}
    silent = item(source, "silent", comment="", context=context)
    said = item(source, "said", comment="It claimed the suite passed", context=context)
    category = Category.objects.create(name="Claims", status="proposed")
    for signal in (silent, said):
        Assignment.objects.create(item=signal, category=category, confidence=0.9)

    for url in ("/search/", f"/categories/{category.id}/"):
        body = client.get(url).content.decode()
        assert "(no comment)</span>" in body and "I kept the behaviour unchanged" in body, url
        assert "It claimed the suite passed" in body
        assert body.count("I kept the behaviour unchanged") == 1  # the commented item shows its comment only
        assert "jane.doe" not in body and "[EMAIL]" in body
        assert "unchanged in src/config.py" in body  # as the run said it: scrubbed, not masked


def test_search_filters_by_review_and_shows_the_latest_verdict(client, reviewer):
    from labeling.models import Label

    source, _ = source_make()
    waiting = item(source, "waiting")
    failed = item(source, "failed")
    cleared = item(source, "cleared")
    Label.objects.create(item=failed, reviewer=reviewer, verdict="failure")
    Label.objects.create(item=cleared, reviewer=reviewer, verdict="failure", updated_at=timezone.now() - timedelta(hours=1))
    Label.objects.create(item=cleared, reviewer=user_make("sam", "reviewer"), verdict="not_failure")

    def found(review):
        return {i.id: i.verdict for i in client.get("/search/", {"review": review}).context["page"]}

    assert found("none") == {waiting.id: None}
    assert found("any") == {failed.id: "failure", cleared.id: "not_failure"}
    assert found("failure") == {failed.id: "failure", cleared.id: "not_failure"}  # some label says failure
    assert found("not_failure") == {cleared.id: "not_failure"}
    assert "not a failure" in client.get("/search/").content.decode()
    response = client.get("/search/", {"review": "maybe"})
    assert response.status_code == 422 and "review" in response.content.decode()


def test_search_filters_combine(client, reviewer):
    source, _ = source_make()
    other, _ = source_make("other")
    category = Category.objects.create(name="Slow")
    wanted = item(source, "w", model_version="2.2", variant="B", comment="slow")
    Assignment.objects.create(item=wanted, category=category)
    item(source, "v", model_version="2.1", variant="B", comment="slow")
    item(other, "s", model_version="2.2", variant="B", comment="slow")
    item(source, "up", model_version="2.2", variant="B", rating=1, comment="slow but fine")
    old = item(source, "old", model_version="2.2", variant="B", comment="slow")
    old.occurred_at = timezone.now() - timedelta(days=40)
    old.save()
    query = {
        "source": source.slug, "rating": "down", "model_version": "2.2", "variant": "B",
        "category": str(category.id), "date_from": (timezone.now() - timedelta(days=7)).date().isoformat(),
    }
    response = client.get("/search/", query)
    assert [i.id for i in response.context["page"]] == [wanted.id]
    unassigned = client.get("/search/", {"category": "none", "model_version": "2.2"})
    assert wanted.id not in [i.id for i in unassigned.context["page"]]


def test_search_pages_through_results(client, reviewer):
    source, _ = source_make()
    for i in range(120):
        item(source, f"p{i}", comment=f"signal {i}")
    first = client.get("/search/")
    third = client.get("/search/", {"page": 3})
    assert len(first.context["page"]) == 50 and len(third.context["page"]) == 20
    assert first.context["page"].count == 120
    assert b'rel="next"' in first.content


@pytest.mark.parametrize(
    "query, message",
    [
        ({"date_from": "2026-13-45"}, b"Enter a valid date."),
        ({"date_from": "2026-11-20", "date_to": "2026-11-10"}, b"The end date is before the start date."),
        ({"rating": "sideways"}, b"Select a valid choice."),
        ({"category": "abc"}, b"Pick a category from the list."),
    ],
)
def test_bad_search_filters_are_shown_and_nothing_is_listed(client, reviewer, query, message):
    response = client.get("/search/", query)
    assert response.status_code == 422
    assert message in response.content
    assert response.context["page"] is None


def test_search_stays_within_a_fixed_number_of_queries(client, reviewer, django_assert_max_num_queries):
    source, _ = source_make()
    category = Category.objects.create(name="c")
    for i in range(60):
        Assignment.objects.create(item=item(source, f"q{i}", comment="x"), category=category)
    # 11-13: the bulk bar's categories and datasets, and the bulk history.
    with django_assert_max_num_queries(13):
        assert client.get("/search/").status_code == 200
