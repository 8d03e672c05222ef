"""The /compare/ page, saved comparisons, and the overview's watched-comparisons partial."""

from datetime import date

import pytest
from django.template.loader import render_to_string
from django.test import RequestFactory

from labeling.compare.saved import pinned_regressions, saved_comparison_create
from labeling.models import SavedComparison
from tests.factories.compare import END, START, params, planted_data
from tests.factories import signed_in, user_make

pytestmark = pytest.mark.django_db

PLANTED_URL = f"/compare/?a=1.0&b=1.1&from={START}&to={END}"


@pytest.fixture
def reviewer(client):
    return signed_in(client, user_make("rev", "reviewer"))


@pytest.mark.parametrize("url", ["/compare/", PLANTED_URL])
def test_anonymous_visitors_are_sent_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302 and response.url.startswith("/login/")


def test_anonymous_visitors_cannot_pin(client):
    response = client.post("/compare/saved/", {"a": "1.0", "b": "1.1"})
    assert response.status_code == 302 and response.url.startswith("/login/")
    assert not SavedComparison.objects.exists()


def test_staff_without_a_review_role_are_refused(client):
    client.force_login(user_make("u"))
    assert client.get(PLANTED_URL).status_code == 403
    assert client.post("/compare/saved/", {"a": "1.0", "b": "1.1"}).status_code == 403


@pytest.mark.parametrize("role", ["reviewer", "admin"])
def test_the_first_visit_shows_the_form_with_the_two_latest_versions_picked(client, role):
    client.force_login(user_make("u", role))
    planted_data()
    response = client.get("/compare/")
    assert response.status_code == 200
    body = response.content.decode()
    # 1.1 is the newest by its last rating, then 1.0 (0.9's ratings are spread over the same days).
    assert response.context["form"]["b"] == "1.1"
    assert '<option value="1.1:A">1.1 · variant A</option>' in body
    assert 'id="compare-data"' not in body


def test_a_reviewer_sees_the_flagged_regression_the_new_category_and_what_the_rates_divide_by(client, reviewer):
    cats = planted_data()
    response = client.get(PLANTED_URL)
    assert response.status_code == 200
    body = response.content.decode()
    assert "2 categories got significantly worse on 1.1" in body
    assert 'id="cmp-regressions"' in body
    assert "all ratings (up and down) of that side" in body  # the denominator, in words
    assert "significantly worse" in body and "too few to test" in body
    assert '<span class="cmp-badge cmp-new">new</span>' in body
    assert f"/search/?category={cats['Regressed'].id}&amp;model_version=1.1&amp;rating=down" in body
    assert "+15.0 pp" in body and "[+8.7, +21.5]" in body and "5.0%" in body and "20.0%" in body
    chart = response.context["chart"]
    assert [row["label"] for row in chart["differences"]][:2] == ["Regressed", "Borderline"]
    assert chart["differences"][0]["url"].startswith(f"/search/?category={cats['Regressed'].id}&")
    assert 'id="compare-data" type="application/json"' in body
    assert "<script>" not in body  # CSP: no inline scripts
    assert "{#" not in body and "{%" not in body  # no template syntax printed as text


def test_the_page_reads_a_fixed_number_of_queries_however_many_categories(client, reviewer, django_assert_max_num_queries):
    planted_data()
    saved_comparison_create(params=params())
    with django_assert_max_num_queries(10):
        assert client.get(PLANTED_URL).status_code == 200


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        ("a=1.0&b=1.1&from=not-a-date", 422, "from: &#x27;not-a-date&#x27; is not a date"),
        ("a=1.0&b=1.1&from=2026-11-10&to=2026-11-01", 422, "to: the end date 2026-11-01 is before the start date 2026-11-10"),
        ("a=1.0&b=1.0", 422, "a and b are the same"),
        ("a=7.7&b=1.1", 404, "a: no feedback for model version &#x27;7.7&#x27;"),
        ("a=1.0&b=", 422, "b: pick the model version to compare with it"),
    ],
)
def test_bad_parameters_show_a_visible_error_beside_the_form(client, reviewer, query, status, message):
    planted_data()
    response = client.get(f"/compare/?{query}")
    assert response.status_code == status
    body = response.content.decode()
    assert 'role="alert" id="compare-error"' in body and message in body
    assert 'id="compare-form"' in body and "compare-data" not in body


def test_an_unknown_version_stays_selected_so_the_reviewer_sees_what_was_asked(client, reviewer):
    planted_data()
    body = client.get("/compare/?a=7.7&b=1.1").content.decode()
    assert '<option value="7.7" selected>7.7 (unknown)</option>' in body


def test_a_side_with_no_ratings_in_the_range_is_explained(client, reviewer):
    planted_data()
    response = client.get("/compare/?a=1.0&b=1.1&from=2026-01-01&to=2026-01-31")
    assert response.status_code == 200
    assert "has no ratings between 2026-01-01 and 2026-01-31" in response.content.decode()


def test_a_reviewer_pins_a_comparison_and_finds_it_in_the_saved_list(client, reviewer):
    planted_data()
    response = client.post(
        "/compare/saved/", {"a": "1.0", "b": "1.1", "from": str(START), "to": str(END), "name": "Launch of 1.1"}
    )
    assert response.status_code == 302 and response.url == PLANTED_URL
    saved = SavedComparison.objects.get()
    assert (saved.name, saved.a_spec, saved.b_spec, saved.date_from, saved.date_to, saved.window_days, saved.pinned) == (
        "Launch of 1.1", "1.0", "1.1", START, END, None, True,
    )
    assert saved.created_by == reviewer
    page = client.get(response.url).content.decode()
    assert "Saved “Launch of 1.1” and pinned it to the overview." in page
    assert "Launch of 1.1" in page and "pinned · unpin" in page


def test_a_rolling_pin_stores_its_length_instead_of_dates(client, reviewer):
    planted_data()
    client.post("/compare/saved/", {"a": "1.0", "b": "1.1", "from": str(START), "to": str(END), "rolling": "1"})
    saved = SavedComparison.objects.get()
    assert (saved.window_days, saved.date_from, saved.date_to) == (14, None, None)


def test_pinning_a_bad_comparison_saves_nothing_and_says_why(client, reviewer):
    planted_data()
    response = client.post("/compare/saved/", {"a": "1.0", "b": "1.0"}, follow=True)
    assert not SavedComparison.objects.exists()
    assert "Not saved: b: compare two different versions" in response.content.decode()


def test_unpinning_from_the_overview_returns_there_and_deleting_removes_it(client, reviewer):
    planted_data()
    saved = saved_comparison_create(params=params())
    response = client.post(f"/compare/saved/{saved.id}/pin", {"pinned": "0", "next": "/"})
    assert response.status_code == 302 and response.url == "/"
    saved.refresh_from_db()
    assert not saved.pinned
    assert client.post(f"/compare/saved/{saved.id}/pin", {"pinned": "1", "next": "https://evil.example/"}).url == "/compare/"
    saved.refresh_from_db()
    assert saved.pinned
    assert client.post(f"/compare/saved/{saved.id}/delete").status_code == 302
    assert not SavedComparison.objects.exists()
    gone = client.post(f"/compare/saved/{saved.id}/delete", follow=True)
    assert "That saved comparison no longer exists." in gone.content.decode()


def test_the_saved_pages_refuse_get(client, reviewer):
    assert client.get("/compare/saved/").status_code == 405


def test_the_overview_partial_highlights_a_pinned_comparisons_regressions(reviewer):
    cats = planted_data()
    saved_comparison_create(params=params(), name="1.1 launch")
    request = RequestFactory().get("/")
    request.user = reviewer
    html = render_to_string(
        "labeling/compare/_overview_pins.html",
        {"pinned_comparisons": pinned_regressions(today=date(2026, 11, 30))},
        request=request,
    )
    assert 'id="pinned-comparisons"' in html and "cmp-pin-regressed" in html
    assert "2 significant regressions" in html
    assert f"/search/?category={cats['Regressed'].id}&amp;model_version=1.1&amp;rating=down" in html
    assert "5.0% → 20.0%" in html and "+15.0 pp" in html


def test_the_overview_partial_is_quiet_without_regressions_and_empty_without_pins(reviewer):
    planted_data()
    request = RequestFactory().get("/")
    request.user = reviewer
    assert render_to_string("labeling/compare/_overview_pins.html", {"pinned_comparisons": []}, request=request).strip() == ""
    saved_comparison_create(params=params(b="1.0", a="0.9"), name="old")
    html = render_to_string(
        "labeling/compare/_overview_pins.html", {"pinned_comparisons": pinned_regressions()}, request=request
    )
    assert "No category got significantly worse" in html and "cmp-pin-regressed" not in html
