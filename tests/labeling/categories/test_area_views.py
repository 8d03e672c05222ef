"""/areas/, an area's page, areas on the category pages and in search: who may, what shows, odd input."""

import re

import pytest

from labeling.models import Area, Assignment, AuditEvent, Category
from tests.factories import client_for, source_make, user_make
from tests.factories.areas import (
    area_make,
    category_make,
    item_make,
    snapshot,
    unsorted_make,
)
from tests.factories.clustering import add_items, run_clustering

pytestmark = pytest.mark.django_db

HUGE = "99999999999999999999"  # more than a 64-bit id


@pytest.fixture
def source():
    return source_make()[0]


@pytest.fixture
def areas(source):
    """Two areas with categories and unsorted items, a category in no area, and a merged area."""
    files = area_make("Files and edits", keywords=["file", "module"])
    tests = area_make("Tests and verification", keywords=["tests"])
    wrong = category_make("Edits the wrong file", [item_make(source) for _ in range(3)], area=files)
    renames = category_make("Renames the wrong symbol", [item_make(source, rating=1)], area=files)
    claims = category_make("Claims tests pass", [item_make(source) for _ in range(2)], area=tests)
    loose = category_make("Asks too many questions", [item_make(source)])
    unsorted_make(files, [item_make(source, comment="edited something odd") for _ in range(2)])
    gone = area_make("Old files", status=Area.Status.MERGED, merged_into=files)
    return {"files": files, "tests": tests, "gone": gone, "wrong": wrong, "renames": renames, "claims": claims,
            "loose": loose}


def body(response) -> str:
    return response.content.decode()


def section(html: str, marker: str) -> str:
    return html.split(marker)[1].split("</section>")[0]


def area_actions(area_id: int, other_id: int):
    """Every POST on an area, with a body that would succeed for a reviewer."""
    return [
        (f"/areas/{area_id}/rename", {"name": "New name"}),
        (f"/areas/{area_id}/confirm", {}),
        (f"/areas/{area_id}/merge", {"target": other_id}),
    ]


# --- Who may do what -------------------------------------------------------------------


def test_anonymous_users_are_sent_to_login_and_change_nothing(client, areas):
    files, tests = areas["files"], areas["tests"]
    for url in ["/areas/", f"/areas/{files.id}/"]:
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith(f"/login/?next={url}")
    before = snapshot()
    posts = area_actions(files.id, tests.id) + [(f"/categories/{areas['wrong'].id}/area", {"area": tests.id})]
    for url, data in posts:
        response = client.post(url, data)
        assert response.status_code == 302 and response.url.startswith("/login/"), url
    assert snapshot() == before


def test_users_without_a_role_get_403_on_every_area_page_and_action_and_change_nothing(nobody, areas):
    files, tests = areas["files"], areas["tests"]
    for url in ["/areas/", f"/areas/{files.id}/"]:
        response = nobody.get(url)
        assert response.status_code == 403 and b"needs the reviewer role" in response.content, url
    before = snapshot()
    posts = area_actions(files.id, tests.id) + [(f"/categories/{areas['wrong'].id}/area", {"area": tests.id})]
    for url, data in posts:
        assert nobody.post(url, data).status_code == 403, url
    assert snapshot() == before


@pytest.mark.parametrize("role", ["reviewer", "admin"])
def test_reviewers_and_admins_open_every_area_page_with_areas_present(role, areas):
    client = client_for(user_make(f"u-{role}", role))
    files = areas["files"]
    for url in ["/areas/", f"/areas/{files.id}/", f"/areas/{areas['gone'].id}/", "/categories/",
                f"/categories/{areas['wrong'].id}/", f"/search/?area={files.id}"]:
        assert client.get(url).status_code == 200, url
    assert client.post(f"/areas/{files.id}/confirm").status_code == 302


@pytest.mark.parametrize("role", ["reviewer", "admin"])
def test_the_pages_answer_when_there_are_no_areas_at_all(role, source):
    client = client_for(user_make(f"u-{role}", role))
    category = category_make("Edits the wrong file", [item_make(source)])
    page = body(client.get("/areas/"))
    assert "No areas yet" in page and "1 failure signal is in no area and no category yet" not in page
    listing = client.get("/categories/")
    assert listing.status_code == 200
    assert 'class="cat-area-row"' not in body(listing) and 'name="area"' not in body(listing)
    detail = body(client.get(f"/categories/{category.id}/"))
    assert 'id="move-area-form"' not in detail and "<dt>Area</dt><dd><span class=\"muted\">none</span>" in detail
    assert client.get("/search/").status_code == 200


def test_actions_refuse_get_requests(reviewer, areas):
    files = areas["files"]
    for suffix in ["rename", "confirm", "merge"]:
        assert reviewer.get(f"/areas/{files.id}/{suffix}").status_code == 405, suffix
    assert reviewer.get(f"/categories/{areas['wrong'].id}/area").status_code == 405


@pytest.mark.parametrize("method, suffix", [
    ("get", "/"), ("post", "/rename"), ("post", "/confirm"), ("post", "/merge"),
])
@pytest.mark.parametrize("area_id", ["987654", HUGE])
def test_an_area_that_does_not_exist_is_404(reviewer, areas, method, suffix, area_id):
    before = snapshot()
    response = getattr(reviewer, method)(f"/areas/{area_id}{suffix}", {"target": areas["files"].id, "name": "x"})
    assert response.status_code == 404
    assert snapshot() == before


def test_the_navigation_links_to_the_areas(reviewer):
    assert '<a href="/areas/">Areas</a>' in body(reviewer.get("/categories/"))


# --- The list of areas -------------------------------------------------------------------


def test_the_list_shows_each_area_with_keywords_categories_items_unsorted_and_share_of_thumbs_down(reviewer, areas,
                                                                                                     source):
    item_make(source)  # a thumbs-down in no area at all still counts in the whole and as unsorted
    page = body(reviewer.get("/areas/"))

    row = page.split(f'<a href="/areas/{areas["files"].id}/">Files and edits</a>')[1].split("</tr>")[0]
    cells = re.findall(r'<td class="num[^"]*">(.*?)</td>', row, re.S)
    assert re.sub(r"<[^>]+>", "", cells[0]).strip() == "2"  # categories
    assert cells[1:3] == ["6", "2"]  # items (4 in categories + 2 unsorted), unsorted
    # 5 of its items are thumbs-down (the up-rated one is not), of 9 in all.
    assert "55.6%" in cells[3] and "(5)" in cells[3]
    assert "module" in row
    tests_row = page.split("Tests and verification</a>")[1].split("</tr>")[0]
    assert "22.2%" in tests_row
    # The merged area is listed apart, with where it went.
    assert "Old files" not in page.split('id="area-table"')[1].split("</table>")[0]
    merged = section(page, 'id="merged-areas"')
    assert f'<a href="/areas/{areas["files"].id}/">Files and edits</a>' in merged
    # The item in no area counts; the one in a category without an area does not.
    assert "1 failure signal is in no area and no category yet" in page


@pytest.mark.parametrize("how_many", [2, 20])
def test_the_list_costs_the_same_queries_however_many_areas(reviewer, source, django_assert_max_num_queries,
                                                            how_many):
    for i in range(how_many):
        area = area_make(f"Area {i}")
        category_make(f"Category {i}", [item_make(source)], area=area)
        unsorted_make(area, [item_make(source)])
    with django_assert_max_num_queries(8):
        response = reviewer.get("/areas/")
    assert response.status_code == 200
    assert len(re.findall(r'<a href="/areas/\d+/">Area \d+</a>', body(response))) == how_many


# --- An area's page ------------------------------------------------------------------------


def test_the_page_shows_the_categories_the_unsorted_bucket_and_the_overall_unsorted_count(reviewer, areas, source):
    files = areas["files"]
    item_make(source)  # in no area and no category
    unsorted_ids = list(Assignment.objects.filter(area=files, category=None).values_list("item_id", flat=True))

    page = body(reviewer.get(f"/areas/{files.id}/"))

    cats = section(page, 'id="area-categories"')
    assert f'<a href="/categories/{areas["wrong"].id}/">Edits the wrong file</a>' in cats
    assert '<td class="num">3</td>' in cats and "Claims tests pass" not in cats
    bucket = section(page, 'id="area-unsorted"')
    assert "Unsorted <span class=\"muted\">(2)</span>" in bucket
    for item_id in unsorted_ids:
        assert f'<a href="/items/{item_id}/">#{item_id}</a>' in bucket
    assert "edited something odd" in bucket
    assert "1 failure signal is in no area and no category at all" in bucket
    for item_id in areas["wrong"].assignments.values_list("item_id", flat=True):
        assert f"/items/{item_id}/" not in bucket  # sorted items are not unsorted
    assert "module" in section(page, 'id="area-header"')


def test_the_unsorted_bucket_pages_by_50_and_odd_page_numbers_still_answer(reviewer, source):
    area = area_make("Busy")
    unsorted_make(area, [item_make(source) for _ in range(55)])

    def rows(query=""):
        response = reviewer.get(f"/areas/{area.id}/{query}")
        assert response.status_code == 200, query
        return section(body(response), 'id="area-unsorted"').count('<a href="/items/')

    first = body(reviewer.get(f"/areas/{area.id}/"))
    assert "Page 1 of 2" in first and "?page=2" in first
    assert rows() == 50
    assert rows("?page=2") == 5
    assert rows("?page=999") == 5  # past the end: the last page
    assert rows(f"?page={HUGE}") == 5
    assert rows("?page=abc") == 50 and rows("?page=%C2%B2") == 50  # not a number: the first page
    assert rows("?page=-3") == 5


def test_the_history_shows_the_areas_changes(reviewer, areas):
    files = areas["files"]
    reviewer.post(f"/areas/{files.id}/rename", {"name": "Files, modules and edits"})
    history = body(reviewer.get(f"/areas/{files.id}/")).split('id="audit-trail"')[1]
    assert "rita</strong> renamed" in history and "Files and edits → Files, modules and edits" in history


def test_a_merged_area_says_where_it_went_and_offers_no_decisions(reviewer, areas):
    page = body(reviewer.get(f"/areas/{areas['gone'].id}/"))
    assert f'merged into <a href="/areas/{areas["files"].id}/">Files and edits</a>' in page
    assert 'id="area-actions"' not in page and 'id="audit-trail"' in page


# --- Rename, confirm, merge ----------------------------------------------------------------


def test_a_reviewer_renames_an_area_and_goes_back_to_its_page(reviewer, areas):
    files = areas["files"]
    response = reviewer.post(f"/areas/{files.id}/rename", {"name": "Files, modules and edits"}, follow=True)
    assert response.redirect_chain == [(f"/areas/{files.id}/", 302)]
    page = body(response)
    assert "Saved “Files, modules and edits”." in page and "<h1>Files, modules and edits</h1>" in page
    assert "named by a reviewer" in page
    files.refresh_from_db()
    assert files.name == "Files, modules and edits" and files.named_by_reviewer
    assert AuditEvent.objects.get(area=files).action == "renamed"


@pytest.mark.parametrize("name, message", [
    ("   ", "An area needs a name."),
    ("x" * 201, "A name can have at most 200 characters."),
])
def test_a_bad_name_is_refused_at_the_field_and_changes_nothing(reviewer, areas, name, message):
    files = areas["files"]
    before = snapshot()
    response = reviewer.post(f"/areas/{files.id}/rename", {"name": name})
    assert response.status_code == 422
    page = body(response)
    assert f'role="alert" style="grid-column:1 / -1; margin:0">{message}' in page
    assert f'value="{name.strip().replace(chr(0), "")}"' in page  # what was typed stays, less the NUL
    assert snapshot() == before


def test_confirm_is_shown_for_a_proposed_area_and_twice_is_refused(reviewer, areas):
    files = areas["files"]
    assert 'id="confirm-button"' in body(reviewer.get(f"/areas/{files.id}/"))
    response = reviewer.post(f"/areas/{files.id}/confirm", follow=True)
    assert "Confirmed “Files and edits”." in body(response) and 'id="confirm-button"' not in body(response)
    response = reviewer.post(f"/areas/{files.id}/confirm")
    assert response.status_code == 409 and "“Files and edits” is already confirmed." in body(response)


def test_a_merge_moves_everything_and_shows_the_target(reviewer, areas):
    files, tests = areas["files"], areas["tests"]
    response = reviewer.post(f"/areas/{files.id}/merge", {"target": tests.id}, follow=True)
    assert response.redirect_chain == [(f"/areas/{tests.id}/", 302)]
    page = body(response)
    assert "Merged “Files and edits” into “Tests and verification”" in page
    assert "Edits the wrong file" in section(page, 'id="area-categories"')
    assert "Unsorted <span class=\"muted\">(2)</span>" in page
    assert "rita</strong> merged" in page.split('id="audit-trail"')[1]
    gone = body(reviewer.get(f"/areas/{files.id}/"))
    assert f'merged into <a href="/areas/{tests.id}/">Tests and verification</a>' in gone
    assert "rita</strong> merged" in gone.split('id="audit-trail"')[1]


def test_the_merge_menu_offers_only_other_open_areas(reviewer, areas):
    menu = body(reviewer.get(f"/areas/{areas['files'].id}/")).split('id="merge-target"')[1].split("</select>")[0]
    assert f'value="{areas["tests"].id}"' in menu
    assert f'value="{areas["files"].id}"' not in menu and "Old files" not in menu


def test_a_merge_into_itself_or_into_a_merged_area_is_refused_with_a_message(reviewer, areas):
    files = areas["files"]
    before = snapshot()
    response = reviewer.post(f"/areas/{files.id}/merge", {"target": files.id})
    assert response.status_code == 422 and "An area cannot be merged into itself." in body(response)
    response = reviewer.post(f"/areas/{areas['tests'].id}/merge", {"target": areas["gone"].id})
    assert response.status_code == 422
    assert "“Old files” is merged; merge into a proposed or confirmed area." in body(response)
    response = reviewer.post(f"/areas/{files.id}/merge", {"target": 987654})
    assert response.status_code == 422 and "The area to merge into no longer exists." in body(response)
    assert snapshot() == before


@pytest.mark.parametrize("target", ["", "abc", "-1", "²", HUGE, str(2**70)])
def test_a_merge_without_a_usable_target_asks_for_one(reviewer, areas, target):
    before = snapshot()
    response = reviewer.post(f"/areas/{areas['files'].id}/merge", {"target": target})
    assert response.status_code == 422 and "Choose the area to merge into." in body(response)
    assert snapshot() == before


# --- Areas on the category list ---------------------------------------------------------------


def test_the_category_list_groups_categories_under_their_area(reviewer, areas):
    files, tests = areas["files"], areas["tests"]
    page = body(reviewer.get("/categories/"))
    headers = re.findall(r'<tr class="cat-area-row">(.*?)</tr>', page, re.S)
    assert len(headers) == 3
    assert f'<a href="/areas/{files.id}/">Files and edits</a>' in headers[0]
    assert "6 items · 2 unsorted" in headers[0]
    assert f'<a href="/areas/{tests.id}/">Tests and verification</a>' in headers[1]
    assert "2 items · 0 unsorted" in headers[1]
    assert "No area" in headers[2]
    # Each category sits under its own area's header, the biggest first within it.
    order = [page.index(f">{name}</a>") for name in (
        "Files and edits", "Edits the wrong file", "Renames the wrong symbol",
        "Tests and verification", "Claims tests pass", "Asks too many questions",
    )]
    assert order == sorted(order)
    assert page.index("No area") < page.index("Asks too many questions")


def test_the_chosen_sort_holds_within_each_area(reviewer, areas):
    page = body(reviewer.get("/categories/?sort=name"))
    assert page.index(">Edits the wrong file</a>") < page.index(">Renames the wrong symbol</a>")
    assert page.index(">Renames the wrong symbol</a>") < page.index(">Claims tests pass</a>")  # next area


def test_the_category_list_filters_by_area(reviewer, areas):
    files = areas["files"]
    page = body(reviewer.get(f"/categories/?area={files.id}"))
    assert "Edits the wrong file" in page and "Renames the wrong symbol" in page
    assert "Claims tests pass" not in page and "Asks too many questions" not in page
    assert f'<option value="{files.id}" selected>' in page
    none = body(reviewer.get("/categories/?area=none"))
    assert "Asks too many questions" in none and "Edits the wrong file" not in none
    # Filters combine: the area with a name search and a status.
    combined = body(reviewer.get(f"/categories/?area={files.id}&q=renames&status=all"))
    assert "Renames the wrong symbol" in combined and "Edits the wrong file" not in combined


def test_the_area_filter_on_the_category_list_follows_a_merge(reviewer, areas):
    page = body(reviewer.get(f"/categories/?area={areas['gone'].id}"))
    assert "“Old files” was merged into “Files and edits”; showing “Files and edits”." in page
    assert "Edits the wrong file" in page and "Claims tests pass" not in page


@pytest.mark.parametrize("value, notice", [
    ("abc", "“abc” is not an area; showing every area."),
    ("²", "“²” is not an area; showing every area."),
    ("-4", "“-4” is not an area; showing every area."),
    (HUGE, f"“{HUGE}” is not an area; showing every area."),
    ("987654", "There is no area #987654; showing every area."),
])
def test_an_odd_area_filter_shows_every_category_with_a_notice(reviewer, areas, value, notice):
    response = reviewer.get("/categories/", {"area": value})
    assert response.status_code == 200
    page = body(response)
    assert notice in page
    assert "Edits the wrong file" in page and "Claims tests pass" in page and "Asks too many questions" in page


@pytest.mark.parametrize("query", ["?page=999", f"?page={HUGE}", "?page=abc", "?area=abc&page=-1"])
def test_odd_page_numbers_on_the_grouped_category_list_still_answer(reviewer, areas, query):
    response = reviewer.get(f"/categories/{query}")
    assert response.status_code == 200 and "Edits the wrong file" in body(response)


@pytest.mark.parametrize("how_many", [5, 50])
def test_the_grouped_category_list_costs_the_same_queries_for_5_or_50_categories(
    reviewer, source, django_assert_max_num_queries, how_many
):
    area_list = [area_make(f"Area {i}") for i in range(3)]
    for i in range(how_many):
        category_make(f"Category {i}", [item_make(source), item_make(source, kind="report", rating=None)],
                      area=area_list[i % 3])
    # 10: the categories, their counts of all time and of the last two weeks, the areas and theirs.
    with django_assert_max_num_queries(10):
        response = reviewer.get("/categories/?sort=growth")
    assert response.status_code == 200
    assert len(re.findall(r'<tr class="cat-area-row">', body(response))) == 3


# --- Areas on a category's page -------------------------------------------------------------


def test_a_category_page_shows_its_area_and_moves_it_to_another(reviewer, areas):
    wrong, tests = areas["wrong"], areas["tests"]
    page = body(reviewer.get(f"/categories/{wrong.id}/"))
    assert f'<dt>Area</dt><dd><a href="/areas/{areas["files"].id}/">Files and edits</a>' in page
    menu = page.split('id="area-target"')[1].split("</select>")[0]
    assert f'value="{tests.id}"' in menu and "Old files" not in menu

    response = reviewer.post(f"/categories/{wrong.id}/area", {"area": tests.id}, follow=True)

    assert response.redirect_chain == [(f"/categories/{wrong.id}/", 302)]
    moved = body(response)
    assert "“Edits the wrong file” is in the area “Tests and verification” now" in moved
    assert f'<a href="/areas/{tests.id}/">Tests and verification</a> <span class="cat-flag"' in moved
    assert "rita</strong> moved to area" in moved.split('id="audit-trail"')[1]
    wrong.refresh_from_db()
    assert wrong.area == tests and wrong.area_by_reviewer
    assert "rita</strong> category moved in" in body(reviewer.get(f"/areas/{tests.id}/"))


@pytest.mark.parametrize("value", ["", "abc", "²", "0", HUGE])
def test_a_move_without_a_usable_area_asks_for_one(reviewer, areas, value):
    before = snapshot()
    response = reviewer.post(f"/categories/{areas['wrong'].id}/area", {"area": value})
    assert response.status_code == 422 and "Choose the area to move it to." in body(response)
    assert snapshot() == before


def test_a_move_to_a_merged_or_missing_area_is_refused_with_a_message(reviewer, areas):
    wrong = areas["wrong"]
    before = snapshot()
    response = reviewer.post(f"/categories/{wrong.id}/area", {"area": areas["gone"].id})
    assert response.status_code == 422
    assert "“Old files” has been merged into “Files and edits”; move the category there instead." in body(response)
    response = reviewer.post(f"/categories/{wrong.id}/area", {"area": 987654})
    assert response.status_code == 422 and "That area no longer exists." in body(response)
    assert snapshot() == before


def test_moving_a_category_that_does_not_exist_is_404(reviewer, areas):
    assert reviewer.post("/categories/987654/area", {"area": areas["tests"].id}).status_code == 404


def test_a_merged_category_offers_no_move(reviewer, areas):
    gone = category_make("Gone", area=areas["files"], status=Category.Status.MERGED, merged_into=areas["wrong"])
    assert 'id="move-area-form"' not in body(reviewer.get(f"/categories/{gone.id}/"))


# --- Search ------------------------------------------------------------------------------------


def found(client, **query) -> set[int]:
    response = client.get("/search/", query)
    assert response.status_code == 200, response.content[:500]
    return {item.id for item in response.context["page"]}


def test_search_filters_by_area_and_combines_with_the_other_filters(reviewer, areas, source):
    files = areas["files"]
    in_files = set(Assignment.objects.filter(area=files).values_list("item_id", flat=True))
    bucket = set(Assignment.objects.filter(area=files, category=None).values_list("item_id", flat=True))
    nowhere = item_make(source)

    assert found(reviewer, area=files.id) == in_files
    assert found(reviewer, area=files.id, category="none") == bucket  # the unsorted bucket
    assert found(reviewer, area=files.id, category=areas["wrong"].id) == set(
        areas["wrong"].assignments.values_list("item_id", flat=True)
    )
    assert found(reviewer, area=files.id, rating="up") == set(areas["renames"].assignments.values_list("item_id", flat=True))
    assert found(reviewer, area=files.id, category=areas["claims"].id) == set()
    no_area = found(reviewer, area="none")
    assert nowhere.id in no_area and not no_area & in_files
    assert areas["loose"].assignments.get().item_id in no_area
    assert found(reviewer, area=987654) == set()


def test_search_offers_the_open_areas_and_shows_each_items_area(reviewer, areas):
    page = body(reviewer.get("/search/", {"area": areas["files"].id}))
    menu = page.split('name="area"')[1].split("</select>")[0]
    assert f'<option value="{areas["files"].id}" selected>Files and edits</option>' in menu
    assert "Tests and verification" in menu and "Old files" not in menu
    assert f'in <a href="/areas/{areas["files"].id}/">Files and edits</a> (unsorted)' in page
    assert f'in <a href="/areas/{areas["files"].id}/">Files and edits</a></span>' in page


@pytest.mark.parametrize("field, value, message", [
    ("area", "abc", "Pick an area from the list."),
    ("area", "²", "Pick an area from the list."),
    ("area", "-1", "Pick an area from the list."),
    ("area", HUGE, "Pick an area from the list."),
    ("category", "²", "Pick a category from the list."),
    ("category", HUGE, "Pick a category from the list."),
])
def test_an_odd_area_or_category_in_search_is_a_clear_error_not_a_crash(reviewer, areas, field, value, message):
    response = reviewer.get("/search/", {field: value})
    assert response.status_code == 422  # as the search form answers every bad filter
    assert message in body(response)
    assert response.context["page"] is None


def test_search_with_areas_stays_within_a_fixed_number_of_queries(reviewer, source, django_assert_max_num_queries):
    area = area_make("A")
    category = category_make("c", [item_make(source) for _ in range(30)], area=area)
    unsorted_make(area, [item_make(source) for _ in range(30)])
    # 11-13: the bulk bar's categories and datasets, and the bulk history.
    with django_assert_max_num_queries(13):
        response = reviewer.get("/search/", {"area": area.id})
    assert response.status_code == 200 and len(response.context["page"]) == 50
    assert category.id  # the category's items are among them


# --- After a real cluster run ----------------------------------------------------------------


def test_the_pages_work_on_the_areas_a_cluster_run_made(reviewer, centers):
    source, _ = source_make()
    add_items(source, centers, 30, seed=1)
    run_clustering()
    area = Area.objects.order_by("id").first()
    assert area is not None
    listing = body(reviewer.get("/areas/"))
    assert f'href="/areas/{area.id}/"' in listing
    page = body(reviewer.get(f"/areas/{area.id}/"))
    assert f'<a href="/runs/{area.created_by_run_id}/">run #{area.created_by_run_id}</a>' in page
    for category in Category.objects.filter(area=area):
        assert f'href="/categories/{category.id}/"' in page
    grouped = body(reviewer.get("/categories/"))
    assert grouped.count('<tr class="cat-area-row">') == Area.objects.filter(categories__isnull=False).distinct().count()
    response = reviewer.get("/search/", {"area": area.id})
    assert response.context["page"].count == Assignment.objects.filter(area=area).count() > 0
