"""The compare page leads to the problem: dates where both sides have data, rows by adjusted significance,
untestable rows folded, the adjusted p beside every flag, areas first with their categories inside."""

import re
import uuid
from datetime import UTC, date, datetime, time, timedelta

import pytest
from django.utils.html import escape

from feedback.models import FeedbackItem
from labeling.compare.comparison import comparison_build
from labeling.compare.figures import format_p
from labeling.compare.output import comparison_json
from labeling.compare.params import compare_params_parse, data_window
from labeling.models import Category
from tests.factories.compare import END, START, add_items, area_data, planted_data
from tests.factories import source_make, user_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(client):
    client.force_login(user_make("rita", "reviewer"))
    return client


def table_of(body: str) -> str:
    return body[body.index('id="cmp-table"'):body.index("</table>", body.index('id="cmp-table"'))]


# --- The default dates ---------------------------------------------------------------------------


def test_the_window_is_where_both_sides_have_ratings(db):
    planted_data()  # 1.1 also has ratings three weeks before 1.0 starts; 0.9 spans the same days as 1.0
    window = data_window(a="1.0", b="1.1")
    assert (window.date_from, window.date_to, window.overlap) == (START, END, True)
    assert data_window(a="1.0:A", b="1.1") == window


def test_sides_that_never_overlap_get_the_span_of_both(db):
    source, _ = source_make("apart")
    add_items(source, version="1.0", n=20, rating=1, start=date(2026, 10, 1), days=5)
    add_items(source, version="2.0", n=20, rating=1, start=date(2026, 11, 1), days=3)
    window = data_window(a="1.0", b="2.0")
    assert (window.date_from, window.date_to, window.overlap) == (date(2026, 10, 1), date(2026, 11, 3), False)


@pytest.mark.parametrize(("a", "b"), [("1.0", "7.7"), ("", "1.1"), ("1.1", "1.1"), ("1.0:Z", "1.1")])
def test_no_window_for_sides_that_cannot_be_compared(db, a, b):
    planted_data()
    assert data_window(a=a, b=b) is None


def test_reports_alone_give_a_side_no_window(db):
    source, _ = source_make("reports")
    add_items(source, version="1.0", n=20, rating=1)
    add_items(source, version="3.0", n=5, rating=None, kind="report")
    assert data_window(a="1.0", b="3.0") is None


def test_the_page_without_dates_compares_the_days_both_sides_have_data(client):
    planted_data()
    response = client.get("/compare/?a=1.0&b=1.1")
    assert response.status_code == 200
    params = response.context["params"]
    assert (params.date_from, params.date_to) == (START, END)
    body = response.content.decode()
    assert f'Dates set to where both sides have ratings: {START} to {END}.' in body
    assert f'id="cmp-from" value="{START}"' in body and f'id="cmp-to" value="{END}"' in body
    assert "Without dates: the days on which both sides have ratings." in body
    # Every day of the chart has ratings on both sides: nothing drawn over empty weeks.
    lines = response.context["chart"]["series"]["lines"]
    assert all(all(n > 0 for n in line["n"]) for line in lines)


def test_the_first_visit_fills_in_the_dates_of_the_latest_two_versions(client):
    planted_data()
    response = client.get("/compare/")
    form = response.context["form"]
    assert (form["a"], form["b"]) == ("1.0", "1.1")
    assert (form["from"], form["to"]) == (str(START), str(END))


def test_sides_that_never_overlap_are_told_so(client):
    source, _ = source_make("apart")
    add_items(source, version="1.0", n=20, rating=1, start=date(2026, 10, 1), days=5)
    add_items(source, version="2.0", n=20, rating=1, start=date(2026, 11, 1), days=3)
    body = client.get("/compare/?a=1.0&b=2.0").content.decode()
    assert "These two sides never had ratings on the same days: the range spans both, 2026-10-01 to 2026-11-03." in body


def test_dates_given_by_hand_are_kept(client):
    planted_data()
    response = client.get(f"/compare/?a=1.0&b=1.1&from={START + timedelta(days=3)}&to={END}")
    assert response.context["params"].date_from == START + timedelta(days=3)
    assert response.context["data_window"] is None and 'id="cmp-window"' not in response.content.decode()


def test_an_unknown_side_still_gets_its_error_and_no_window(client):
    planted_data()
    response = client.get("/compare/?a=7.7&b=1.1")
    assert response.status_code == 404
    assert "a: no feedback for model version &#x27;7.7&#x27;" in response.content.decode()
    assert response.context["data_window"] is None


def test_the_api_keeps_its_documented_default_of_ninety_days(db):
    planted_data()
    p = compare_params_parse(a="1.0", b="1.1", today=date(2026, 11, 30))
    assert (p.date_from, p.date_to) == (date(2026, 9, 2), date(2026, 11, 30))


# --- Rows by adjusted significance, folds, the p beside the flag ---------------------------------


def test_rows_run_from_the_most_significant_and_the_untestable_are_folded(client):
    cats = planted_data()
    body = client.get(f"/compare/?a=1.0&b=1.1&from={START}&to={END}").content.decode()
    table = table_of(body)
    order = [table.index(f'data-category="{cats[name].id}"') for name in
             ("Regressed", "Brand new", "Borderline", "Unchanged", "Rare", "Gone")]
    assert order == sorted(order)
    # Rare (raw p 0.018 on 9 thumbs-down) and Gone (3) are behind one line, hidden until it is clicked.
    assert "2 categories with too few thumbs-down to test" in table
    folded = table[table.index('id="cmp-fold-outside"'):]
    assert folded.startswith('id="cmp-fold-outside" data-folded="cmp-fold-outside" hidden>')
    assert f'data-category="{cats["Rare"].id}"' in folded and f'data-category="{cats["Regressed"].id}"' not in folded


def flag_cell(table: str, category: Category) -> str:
    row = table[table.index(f'data-category="{category.id}"'):]
    row = row[:row.index("</tr>")]
    return row[row.index('class="cmp-flag-cell"'):]


def test_every_flag_has_its_p_beside_it_adjusted_when_tested(client):
    cats = planted_data()
    comparison = comparison_build(params=compare_params_parse(
        a="1.0", b="1.1", date_from=str(START), date_to=str(END)))
    rows = {row.name: row for row in comparison.categories}
    table = table_of(client.get(f"/compare/?a=1.0&b=1.1&from={START}&to={END}").content.decode())
    regressed = flag_cell(table, cats["Regressed"])
    assert "significantly worse" in regressed
    assert escape(f"adj. p {format_p(rows['Regressed'].p_adjusted)}") in regressed
    borderline = flag_cell(table, cats["Borderline"])
    assert "no significant change" in borderline and "adj. p 0.05" in borderline
    rare = flag_cell(table, cats["Rare"])
    assert "too few to test" in rare and "p 0.0183 unadjusted" in rare


def test_the_bar_chart_draws_only_the_tested_categories(client):
    planted_data()
    response = client.get(f"/compare/?a=1.0&b=1.1&from={START}&to={END}")
    chart = response.context["chart"]
    assert [row["label"] for row in chart["differences"]] == ["Regressed", "Borderline", "Brand new", "Unchanged"]
    assert chart["untested"] == 2
    assert "2 categories with too few thumbs-down to test are not drawn" in response.content.decode()


def test_the_api_keeps_its_order_from_the_largest_increase(db):
    planted_data()
    comparison = comparison_build(params=compare_params_parse(
        a="1.0", b="1.1", date_from=str(START), date_to=str(END)))
    differences = [row["difference"] for row in comparison_json(comparison)["categories"]]
    assert len(differences) == 6 and differences == sorted(differences, reverse=True)


# --- Areas first ---------------------------------------------------------------------------------


def test_areas_are_the_first_level_with_their_categories_inside_and_their_small_ones_folded(client):
    made = area_data()
    table = table_of(client.get(f"/compare/?a=1.0&b=1.1&from={START}&to={END}").content.decode())
    # Tests (significantly worse) first, its three small categories folded under it; then Steady with
    # its two; then the categories in no area, Loose folded.
    tests_group = table[table.index(f'id="cmp-area-{made["Tests"].id}"'):table.index(f'id="cmp-fold-area-{made["Tests"].id}"')]
    assert "3 categories with too few thumbs-down to test" in tests_group
    assert "adj. p" in tests_group[:tests_group.index("</tr>")]
    fold = table[table.index(f'id="cmp-fold-area-{made["Tests"].id}"'):]
    fold = fold[:fold.index("</tbody>")]
    assert all(f'data-category="{made[name].id}"' in fold for name in ("Skipped", "Stubbed", "Hardcoded"))
    assert ' hidden>' in fold[:120]
    order = [table.index(marker) for marker in (
        f'data-area="{made["Tests"].id}"', f'data-area="{made["Steady"].id}"',
        f'data-category="{made["Even one"].id}"', "Not in an area", f'data-category="{made["Loose"].id}"',
    )]
    assert order == sorted(order)
    assert re.search(r'id="cmp-fold-outside" data-folded="cmp-fold-outside" hidden>', table)


def test_an_area_too_small_to_test_is_folded_with_its_categories(client):
    source, _ = source_make(f"small-{uuid.uuid4().hex[:6]}")
    from labeling.models import Area, Assignment

    tiny = Area.objects.create(name="Tiny", status=Area.Status.CONFIRMED)
    category = Category.objects.create(name="Tiny one", status=Category.Status.CONFIRMED, area=tiny)
    for version, downs in (("1.0", 2), ("1.1", 3)):
        items = FeedbackItem.objects.bulk_create(
            FeedbackItem(source=source, external_id=f"{version}-{n}", kind="rating", rating=-1 if n < downs else 1,
                         model_version=version, variant="A", receipt_id=uuid.uuid4(), status="assigned",
                         occurred_at=datetime.combine(START + timedelta(days=n % 7), time(12), tzinfo=UTC))
            for n in range(100)
        )
        Assignment.objects.bulk_create(Assignment(item=item, category=category, area=tiny) for item in items[:downs])
    table = table_of(client.get(f"/compare/?a=1.0&b=1.1&from={START}&to={END}").content.decode())
    assert "1 area with too few thumbs-down to test" in table
    group = table[table.index(f'id="cmp-area-{tiny.id}"'):]
    assert group.startswith(f'id="cmp-area-{tiny.id}" data-folded="cmp-fold-areas" hidden>')
