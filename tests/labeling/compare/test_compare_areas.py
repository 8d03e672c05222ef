"""labeling.compare.comparison one level up: each area tested like a category, with its categories inside.

The planted data set (`area_data`): version 1.0 (a) and 1.1 (b), 400 ratings
each between 2026-11-02 and 2026-11-15. Thumbs-down:

| area    | category    | a  | b  | what it is for                                           |
| ------- | ----------- | -- | -- | -------------------------------------------------------- |
| Tests   | Skipped     |  2 |  6 | 8 in all: too few to test                                |
| Tests   | Stubbed     |  2 |  6 | 8 in all: too few to test                                |
| Tests   | Hardcoded   |  2 |  6 | 8 in all: too few to test                                |
| Tests   | (unsorted)  |  1 |  3 | the area's unsorted bucket: counted in the area          |
| Steady  | Even one    | 15 | 15 | tested, unchanged                                        |
| Steady  | Even two    | 15 | 15 | tested, unchanged                                        |
| (none)  | Loose       |  3 |  3 | a category outside any area                              |
| (none)  | (none)      |  5 |  5 | no assignment at all                                     |

and thumbs-up to 400 on each side. The area Tests has 7 thumbs-down on a and
21 on b: together they are enough to test, and the rise is significant even
after Holm over the two areas tested; none of its three categories is
tested, so no category is flagged.
"""

import csv
import io
from datetime import date

import pytest
from django.template.loader import render_to_string
from django.test import RequestFactory

from labeling.compare.comparison import comparison_build
from labeling.compare.params import CompareParams, compare_params_parse
from labeling.compare.rows import AreaRow
from labeling.compare.saved import pinned_regressions, saved_comparison_create
from labeling.models import Area, Category
from tests.factories.compare import END, START, add, area_data
from tests.factories import signed_in, source_make, user_make

pytestmark = pytest.mark.django_db

QUERY = {"a": "1.0", "b": "1.1", "from": str(START), "to": str(END)}
PAGE_URL = f"/compare/?a=1.0&b=1.1&from={START}&to={END}"


def params(a="1.0", b="1.1") -> CompareParams:
    return compare_params_parse(a=a, b=b, date_from=str(START), date_to=str(END))


def areas_by_name(comparison) -> dict[str, AreaRow]:
    return {row.name: row for row in comparison.areas}


@pytest.fixture
def reviewer(client):
    return signed_in(client, user_make("rev", "reviewer"))


# --- The figures ----------------------------------------------------------------------------


def test_an_area_whose_small_categories_are_each_too_few_to_test_is_flagged_and_none_of_them_is():
    made = area_data()
    comparison = comparison_build(params=params())
    area = areas_by_name(comparison)["Tests"]

    assert (comparison.a.ratings, comparison.b.ratings) == (400, 400)
    assert (area.down_a, area.down_b) == (7, 21)
    assert (area.signals_a, area.signals_b) == (7, 23)  # b's two reports are signals, not ratings
    assert area.rate_a == pytest.approx(0.0175) and area.rate_b == pytest.approx(0.0525)
    assert area.difference == pytest.approx(0.035)
    # Pooled 28/800 = 0.035; se = sqrt(0.035 * 0.965 * (1/400 + 1/400)) = 0.0129952; z = 0.035 / se.
    assert area.z == pytest.approx(2.693304, abs=1e-6)
    assert area.p_value == pytest.approx(0.0070748, rel=1e-4)
    # Holm over the two areas tested (Tests, Steady): the smaller p times 2.
    assert area.p_adjusted == pytest.approx(0.0141495, rel=1e-4)
    # Newcombe from Wilson 7/400 = [0.008502, 0.035677] and 21/400 = [0.034592, 0.078922].
    assert area.ci_low == pytest.approx(0.009483, abs=1e-6) and area.ci_high == pytest.approx(0.062912, abs=1e-6)
    assert area.tested and area.significant and area.direction == "worse" and area.regression
    assert comparison.area_regressions == [area]

    rows = {row.name: row for row in area.categories}
    assert set(rows) == {"Skipped", "Stubbed", "Hardcoded"}
    for row in rows.values():
        assert (row.down_a, row.down_b) == (2, 6)
        assert not row.tested and not row.significant and row.p_adjusted is None
    assert comparison.regressions == []
    assert area.category_ids == [row.category_id for row in area.categories]
    assert set(area.category_ids) == {made[name].id for name in ("Skipped", "Stubbed", "Hardcoded")}


def test_an_area_whose_rate_does_not_change_is_not_flagged():
    area_data()
    comparison = comparison_build(params=params())
    steady = areas_by_name(comparison)["Steady"]
    assert (steady.down_a, steady.down_b, steady.difference) == (30, 30, 0.0)
    assert steady.z == 0.0 and steady.p_value == pytest.approx(1.0) and steady.p_adjusted == pytest.approx(1.0)
    assert steady.tested and not steady.significant and steady.direction == "" and not steady.regression
    assert [row.name for row in steady.categories] == ["Even one", "Even two"]
    assert all(row.tested and not row.significant for row in steady.categories)


def test_areas_are_corrected_as_a_family_of_their_own_and_leave_the_categories_figures_alone():
    area_data()
    comparison = comparison_build(params=params())
    assert comparison.areas_tested == 2
    # The categories' family is still the categories tested: the two of Steady.
    assert comparison.tested == 2
    even = {row.name: row for row in comparison.categories}["Even one"]
    assert even.p_adjusted == pytest.approx(1.0)


def test_an_area_counts_its_unsorted_items_and_the_side_totals_say_what_lies_outside_any_area():
    area_data()
    comparison = comparison_build(params=params())
    tests = areas_by_name(comparison)["Tests"]
    assert (tests.unsorted_down_a, tests.unsorted_down_b) == (1, 3)
    assert (tests.unsorted_signals_a, tests.unsorted_signals_b) == (1, 5)
    assert tests.down_b == sum(row.down_b for row in tests.categories) + tests.unsorted_down_b
    a, b = comparison.a, comparison.b
    # Outside any area: Loose (3) and the five unassigned; outside any category: the five and the unsorted.
    assert (a.no_area_down, b.no_area_down) == (8, 8)
    assert (a.uncategorized_down, b.uncategorized_down) == (6, 8)
    assert [row.name for row in comparison.outside_areas] == ["Loose"]


def test_areas_are_sorted_from_the_largest_increase_and_their_search_links_name_the_area():
    made = area_data()
    comparison = comparison_build(params=params())
    assert [row.name for row in comparison.areas] == ["Tests", "Steady"]
    tests = comparison.areas[0]
    assert tests.items_b_url == (
        f"/search/?area={made['Tests'].id}&model_version=1.1&rating=down&date_from=2026-11-02&date_to=2026-11-15"
    )
    assert tests.items_a_url.startswith(f"/search/?area={made['Tests'].id}&model_version=1.0&")


def test_a_merged_area_is_left_out_and_its_thumbs_down_count_outside_any_area():
    made = area_data()
    merged = Area.objects.create(name="Old", status=Area.Status.MERGED, merged_into=made["Tests"])
    add(made["source"], version="1.1", n=4, area=merged)
    comparison = comparison_build(params=params())
    assert "Old" not in areas_by_name(comparison)
    assert comparison.b.no_area_down == 12 and comparison.b.ratings == 404


def test_an_area_seen_only_on_the_newer_side_is_marked_new():
    made = area_data()
    fresh = Area.objects.create(name="Fresh")
    add(made["source"], version="1.1", n=3, area=fresh)
    row = areas_by_name(comparison_build(params=params()))["Fresh"]
    assert row.is_new and not row.is_gone and (row.down_a, row.down_b) == (0, 3) and row.categories == []


def test_the_comparison_reads_five_queries_with_areas(django_assert_num_queries):
    area_data()
    p = params()
    with django_assert_num_queries(5):  # the sides' spans, the counts, their areas, their categories, the series by day
        comparison = comparison_build(params=p)
    assert len(comparison.areas) == 2


# --- JSON and CSV ---------------------------------------------------------------------------


def test_the_json_answer_carries_an_areas_list_beside_the_categories(client, reviewer):
    made = area_data()
    data = client.get("/api/v1/compare", QUERY).json()
    assert data["areas_tested"] == 2 and data["tested"] == 2
    assert (data["a"]["no_area_down"], data["b"]["no_area_down"]) == (8, 8)
    areas = {row["name"]: row for row in data["areas"]}
    tests = areas["Tests"]
    assert {key: tests[key] for key in ("area_id", "status", "down_a", "down_b", "rate_a", "rate_b", "difference")} == {
        "area_id": made["Tests"].id, "status": "confirmed", "down_a": 7, "down_b": 21,
        "rate_a": 0.0175, "rate_b": 0.0525, "difference": 0.035,
    }
    assert (tests["ci_low"], tests["ci_high"], tests["z"]) == (0.009483, 0.062912, 2.6933)
    assert tests["p_value"] == pytest.approx(0.0070748, rel=1e-4)
    assert tests["p_adjusted"] == pytest.approx(0.0141495, rel=1e-4)
    assert (tests["tested"], tests["significant"], tests["direction"], tests["is_new"], tests["is_gone"]) == (
        True, True, "worse", False, False,
    )
    assert (tests["unsorted_down_a"], tests["unsorted_down_b"]) == (1, 3)
    assert sorted(tests["categories"]) == sorted(made[name].id for name in ("Skipped", "Stubbed", "Hardcoded"))
    assert tests["items_b_url"].startswith(f"/search/?area={made['Tests'].id}&model_version=1.1&rating=down")
    assert areas["Steady"]["significant"] is False
    assert {row["name"] for row in data["categories"]} == {"Skipped", "Stubbed", "Hardcoded", "Even one", "Even two", "Loose"}
    assert not any(row["significant"] for row in data["categories"])


def test_the_csv_answer_has_a_row_per_area_followed_by_its_categories(client, reviewer):
    made = area_data()
    response = client.get("/api/v1/compare", QUERY | {"format": "csv"})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    # The rollout checks' rows come last (tests/rollouts/test_rollout_compare.py): the table of areas and categories first.
    levels = [row["level"] for row in rows]
    assert levels[-6:] == ["check"] * 6 and "check" not in levels[:-6]
    rows = rows[:-6]
    assert [(row["level"], row["name"]) for row in rows] == [
        ("area", "Tests"), ("category", "Hardcoded"), ("category", "Skipped"), ("category", "Stubbed"),
        ("area", "Steady"), ("category", "Even one"), ("category", "Even two"),
        ("category", "Loose"),
    ]
    tests = rows[0]
    assert (tests["area_id"], tests["category_id"], tests["down_a"], tests["down_b"], tests["significant"]) == (
        str(made["Tests"].id), "", "7", "21", "True",
    )
    assert (tests["ratings_a"], tests["ratings_b"], tests["a"], tests["b"]) == ("400", "400", "1.0", "1.1")
    assert rows[1]["area_id"] == str(made["Tests"].id) and rows[1]["tested"] == "False"
    assert rows[-1]["area_id"] == ""  # Loose is in no area


def test_the_openapi_document_describes_the_areas(client):
    schemas = client.get("/api/openapi.json").json()["components"]["schemas"]
    assert {"areas", "areas_tested", "categories"} <= set(schemas["CompareOut"]["properties"])
    assert {"area_id", "categories", "p_adjusted", "significant", "unsorted_down_b"} <= set(
        schemas["CompareAreaOut"]["properties"]
    )


# --- The page and the overview --------------------------------------------------------------


def test_the_page_lists_each_area_first_with_its_categories_and_flags_the_regressed_area(client, reviewer):
    made = area_data()
    response = client.get(PAGE_URL)
    assert response.status_code == 200
    body = response.content.decode()
    assert "1 area got significantly worse on 1.1" in body
    alert = body[body.index('id="cmp-regressions"'):body.index('id="cmp-diff-card"')]
    assert "Tests" in alert and "+3.5 pp" in alert and "1.8% → 5.2%" in alert
    table = body[body.index('id="cmp-table"'):]
    # Area rows first, each followed by its categories, then the categories in no area.
    order = [table.index(marker) for marker in (
        f'data-area="{made["Tests"].id}"', f'data-category="{made["Hardcoded"].id}"',
        f'data-area="{made["Steady"].id}"', f'data-category="{made["Even one"].id}"',
        "Not in an area", f'data-category="{made["Loose"].id}"',
    )]
    assert order == sorted(order)
    tests_row = table[table.index(f'data-area="{made["Tests"].id}"'):]
    tests_row = tests_row[:tests_row.index("</tr>")]
    assert "cmp-row-worse" in table[table.index('<tr class="cmp-area-row'):][:80]
    assert "significantly worse" in tests_row and "[+0.9, +6.3]" in tests_row
    assert f"/search/?area={made['Tests'].id}&amp;model_version=1.1&amp;rating=down" in tests_row
    assert "too few to test" in table
    assert "unsorted in this area" in table
    assert "Holm&#x27;s correction runs separately over the" in body or "Holm's correction runs separately over the" in body


def test_the_page_renders_without_areas_as_a_list_of_categories(client, reviewer):
    source, _ = source_make()
    category = Category.objects.create(name="No area here", status=Category.Status.CONFIRMED)
    add(source, version="1.0", n=2, category=category)
    add(source, version="1.1", n=9, category=category)
    add(source, version="1.0", n=3)
    for version in ("1.0", "1.1"):
        add(source, version=version, n=50, rating=1)
    response = client.get(PAGE_URL)
    assert response.status_code == 200
    body = response.content.decode()
    assert response.context["comparison"].areas == []
    assert "<h2>Per category</h2>" in body and "No area here" in body
    assert "cmp-area-row" not in body and "Not in an area" not in body and "not in an open area" not in body


def test_the_page_renders_with_no_signals_in_any_area_or_category(client, reviewer):
    source, _ = source_make()
    for version in ("1.0", "1.1"):
        add(source, version=version, n=4)
        add(source, version=version, n=6, rating=1)
    body = client.get(PAGE_URL).content.decode()
    assert "No categorised signals on either side in this range." in body


def test_a_pinned_comparison_whose_area_regressed_is_highlighted_on_the_overview(reviewer):
    made = area_data()
    quiet = saved_comparison_create(params=params(b="1.0", a="1.1"), name="backwards")
    loud = saved_comparison_create(params=params(), name="1.1 launch")
    statuses = pinned_regressions(today=date(2026, 11, 30))
    # Only an area regressed, yet the pin counts as regressed and comes first.
    assert [status.saved.id for status in statuses] == [loud.id, quiet.id]
    assert [row.name for row in statuses[0].area_regressions] == ["Tests"] and statuses[0].regressions == []
    assert [row.name for row in statuses[1].area_improvements] == ["Tests"]
    request = RequestFactory().get("/")
    request.user = reviewer
    html = render_to_string("labeling/compare/_overview_pins.html", {"pinned_comparisons": statuses}, request=request)
    loud_html = html[html.index("1.1 launch"):html.index("backwards")]
    assert "cmp-pin-regressed" in html[:html.index("1.1 launch")]
    assert "1 significant regression</strong>" in loud_html
    assert f'data-area="{made["Tests"].id}"' in loud_html and "1.8% → 5.2%" in loud_html and "+3.5 pp" in loud_html
    assert "No area or category got significantly worse; 1 got significantly better" in html


def test_the_overview_page_shows_the_regressed_area_of_a_pin(client, reviewer):
    area_data()
    saved_comparison_create(params=params(), name="1.1 launch")
    body = client.get("/").content.decode()
    assert 'id="pinned-comparisons"' in body and "cmp-pin-regressed" in body and "Tests" in body
