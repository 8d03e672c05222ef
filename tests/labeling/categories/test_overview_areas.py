"""The top areas on the overview: figures, links, order, merged areas left out, and the page without areas."""

import re

import pytest

from labeling.areas.selectors import top_areas
from labeling.models import Area, Category
from tests.factories import client_for, source_make, user_make
from tests.factories.areas import area_make, category_make, item_make, unsorted_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def source():
    return source_make()[0]


@pytest.fixture
def areas(source):
    """Files: 3 down + 1 up in categories, 2 down unsorted. Tests: 2 down. A merged area and an empty one."""
    files = area_make("Files and edits", status=Area.Status.CONFIRMED)
    tests = area_make("Tests and verification")
    category_make("Edits the wrong file", [item_make(source) for _ in range(3)], area=files)
    category_make("Renames the wrong symbol", [item_make(source, rating=1)], area=files)
    unsorted_make(files, [item_make(source) for _ in range(2)])
    category_make("Claims tests pass", [item_make(source) for _ in range(2)], area=tests)
    category_make("Asks too many questions", [item_make(source) for _ in range(2)])  # in no area
    gone = area_make("Old files", status=Area.Status.MERGED, merged_into=files)
    empty = area_make("Nothing here yet")
    return {"files": files, "tests": tests, "gone": gone, "empty": empty}


def top_areas_section(html: str) -> str:
    return html.split('id="top-areas"')[1].split("</section>")[0]


def rows(section: str) -> list[list[str]]:
    """The table's body rows as lists of cell texts (tags stripped, spaces squeezed)."""
    body = section.split("<tbody>")[1]
    found = []
    for row in re.findall(r"<tr>(.*?)</tr>", body, flags=re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)
        found.append([" ".join(re.sub(r"<[^>]+>", " ", cell).split()) for cell in cells])
    return found


def test_the_overview_lists_the_open_areas_biggest_first_with_their_figures(reviewer, areas):
    response = reviewer.get("/")

    assert response.status_code == 200
    section = top_areas_section(response.content.decode())
    # 9 thumbs-down in all: files has 5 of them (3 in a category, 2 unsorted), tests 2.
    assert rows(section) == [
        ["Files and edits", "55.6% (5)", "6", "2"],
        ["Tests and verification proposed", "22.2% (2)", "2", "0"],
    ]
    assert f'<a href="/areas/{areas["files"].id}/">Files and edits</a>' in section
    assert f'<a href="/areas/{areas["tests"].id}/">Tests and verification</a>' in section


def test_merged_and_empty_areas_are_not_among_the_top_areas(reviewer, areas):
    section = top_areas_section(reviewer.get("/").content.decode())

    assert "Old files" not in section and "Nothing here yet" not in section


def test_the_top_areas_stand_beside_the_top_categories(reviewer, areas):
    html = reviewer.get("/").content.decode()

    grid = html.split('<div class="grid-2">')[2]  # the second grid: charts first
    assert "Top failure categories" in grid and 'id="top-areas"' in grid
    assert "Model versions" in html.split('id="top-areas"')[1]  # moved below, not dropped


def test_without_areas_the_overview_shows_no_area_section_and_looks_as_before(reviewer, source):
    category_make("Edits the wrong file", [item_make(source) for _ in range(3)])
    Category.objects.filter(name="Edits the wrong file").update(status=Category.Status.CONFIRMED)

    response = reviewer.get("/")

    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="top-areas"' not in html and "Top areas" not in html
    grid = html.split('<div class="grid-2">')[2]
    assert "Top failure categories" in grid and "Model versions" in grid
    assert html.count('<div class="grid-2">') == 2


def test_areas_with_no_items_leave_the_overview_as_it_was(reviewer):
    area_make("Nothing here yet")

    html = reviewer.get("/").content.decode()

    assert 'id="top-areas"' not in html


def test_the_share_of_down_is_blank_when_nothing_was_thumbed_down(reviewer, source):
    files = area_make("Files and edits")
    unsorted_make(files, [item_make(source, rating=1)])

    section = top_areas_section(reviewer.get("/").content.decode())

    assert rows(section) == [["Files and edits proposed", "–", "1", "1"]]


def test_the_overview_lists_at_most_ten_areas(source):
    for index in range(12):
        unsorted_make(area_make(f"Area {index:02d}"), [item_make(source) for _ in range(index + 1)])

    listed = top_areas(limit=10)

    assert [area.name for area in listed] == [f"Area {index:02d}" for index in range(11, 1, -1)]


def test_the_overview_with_many_areas_reads_the_same_fixed_number_of_queries(
    reviewer, source, django_assert_max_num_queries
):
    for index in range(10):
        area = area_make(f"Area {index}")
        category_make(f"Category {index}", [item_make(source) for _ in range(index + 1)], area=area)
        unsorted_make(area, [item_make(source)])
    # The bound of tests/labeling/search/test_overview_and_search.py's overview test, unchanged: the areas cost two queries.
    with django_assert_max_num_queries(14):
        assert reviewer.get("/").status_code == 200


def test_staff_without_a_review_role_still_go_to_the_report_form(areas):
    response = client_for(user_make("sam")).get("/")

    assert response.status_code == 302 and response.url == "/reports/new"
