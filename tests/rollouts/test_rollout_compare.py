"""The comparison's rows per rollout check: a planted rise is flagged, with the categories' statistics, on the
compare page and in the comparison API (JSON and CSV)."""

import csv
import io
from datetime import timedelta

import pytest

from labeling.compare.statistics import newcombe_interval, two_proportion_z_test
from rollouts import services
from rollouts.compare import check_rows, check_rows_json
from rollouts.models import RolloutFlag
from tests.factories import client_for, user_make
from tests.factories.rollouts import params_for

pytestmark = pytest.mark.django_db


def test_a_planted_rise_in_reading_history_is_a_flagged_regression(planted_rollouts):
    rows = {row.check_name: row for row in check_rows(params=params_for(planted_rollouts))}
    row = rows["vcs_history"]
    assert (row.rollouts_a, row.rollouts_b, row.down_a, row.down_b) == (1000, 1000, 3, 41)
    assert row.rate_a_display == "0.3%" and row.rate_b_display == "4.1%"
    assert row.tested and row.significant and row.regression
    # The same figures the categories would get for these counts.
    difference, low, high = newcombe_interval(x_a=3, n_a=1000, x_b=41, n_b=1000)
    assert (row.difference, row.ci_low, row.ci_high) == (difference, low, high)
    _, p = two_proportion_z_test(x_a=3, n_a=1000, x_b=41, n_b=1000)
    assert row.p_value == p and row.p_adjusted == pytest.approx(min(1.0, p * row_count_tested(rows)))
    # The read of a test file and `git status` are near misses: no check moved.
    assert all(not other.significant for name, other in rows.items() if name != "vcs_history")
    assert list(rows)[0] == "vcs_history"  # the largest rise first


def row_count_tested(rows) -> int:
    return sum(1 for row in rows.values() if row.tested)


def test_dismissed_flags_do_not_count(planted_rollouts):
    reviewer = user_make("rita", "reviewer")
    for flag in RolloutFlag.objects.filter(item__model_version="2.2", check_name="vcs_history")[:40]:
        services.flag_decide(flag_id=flag.id, reviewer=reviewer, decision="dismissed")
    row = {row.check_name: row for row in check_rows(params=params_for(planted_rollouts))}["vcs_history"]
    assert row.down_b == 1 and not row.significant


def test_a_window_without_rollouts_has_rows_that_are_not_tested(planted_rollouts):
    day = planted_rollouts - timedelta(days=20)
    rows = check_rows(params=params_for(day))
    assert rows and all(row.rollouts_a == row.rollouts_b == 0 and not row.tested for row in rows)
    assert all(row.rate_a is None for row in rows)
    assert check_rows_json(rows)[0]["rate"] == {"a": None, "b": None}


def test_the_compare_page_loads_a_row_per_check(planted_rollouts):
    client = client_for(user_make("rita", "reviewer"))
    query = {"a": "2.1", "b": "2.2", "from": planted_rollouts.isoformat(), "to": planted_rollouts.isoformat()}
    page = client.get("/compare/", query).content.decode()
    assert f'hx-get="/rollouts/compare/?a=2.1&amp;b=2.2&amp;from={planted_rollouts}&amp;to={planted_rollouts}"' in page
    html = client.get("/rollouts/compare/", query).content.decode()
    assert 'id="cmp-checks-table"' in html
    row = html.split('data-check="vcs_history"')[1].split("</tr>")[0]
    assert "4.1%" in row and "0.3%" in row and "significantly more often" in row
    assert "/search/?flag=vcs_history&amp;model_version=2.2" in row


def test_the_checks_rows_refuse_a_comparison_that_cannot_be_made(planted_rollouts):
    client = client_for(user_make("rita", "reviewer"))
    response = client.get("/rollouts/compare/", {"a": "2.1"})
    assert response.status_code in (400, 422) and 'role="alert"' in response.content.decode()
    response = client.get("/rollouts/compare/", {"a": "2.1", "b": "9.9"})
    assert response.status_code in (404, 422) and "9.9" in response.content.decode()
    assert client_for(user_make("olga")).get("/rollouts/compare/", {"a": "2.1", "b": "2.2"}).status_code == 403


# --- The comparison API: a row per check in JSON and CSV ----------------------------------


def api_query(day, **more) -> dict:
    return {"a": "2.1", "b": "2.2", "from": day.isoformat(), "to": day.isoformat()} | more


def test_the_compare_api_answers_a_row_per_check_with_the_planted_rise(planted_rollouts):
    client = client_for(user_make("rita", "reviewer"))
    data = client.get("/api/v1/compare", api_query(planted_rollouts)).json()
    assert data["checks"][0]["check"] == "vcs_history"  # the largest rise first
    row = {row["check"]: row for row in data["checks"]}["vcs_history"]
    assert (row["title"], row["kind"]) == ("Reads version-control history", "reward hacking")
    assert row["rollouts"] == {"a": 1000, "b": 1000} and row["flagged"] == {"a": 3, "b": 41}
    assert row["rate"] == {"a": 0.003, "b": 0.041} and row["difference"] == 0.038
    assert row["tested"] and row["significant"] and row["regression"] and row["direction"] == "worse"
    assert row["items_b_url"] == f"/search/?flag=vcs_history&model_version=2.2&date_from={planted_rollouts}&date_to={planted_rollouts}"
    # The figures of the compare page's rows, and the check family counted apart from the categories.
    assert data["checks"] == check_rows_json(check_rows(params=params_for(planted_rollouts)))
    assert data["checks_tested"] == sum(row["tested"] for row in data["checks"]) and data["tested"] == 0
    assert "checked rollouts" in data["checks_denominator"]
    # The ratings stay the categories' denominator, beside the checks'.
    assert (data["a"]["ratings"], data["b"]["ratings"]) == (1000, 1000)


def test_the_compare_csv_has_a_check_row_in_the_table_s_own_columns(planted_rollouts):
    client = client_for(user_make("rita", "reviewer"))
    response = client.get("/api/v1/compare", api_query(planted_rollouts, format="csv"))
    assert response.status_code == 200
    header, *lines = response.content.decode().splitlines()
    assert header.startswith("level,category_id,area_id,name,status,a,b,from,to,ratings_a,ratings_b,")
    assert header.endswith(",is_new,is_gone,check,rollouts_a,rollouts_b")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {row["level"] for row in rows} == {"check"}  # no categories in these data
    row = next(row for row in rows if row["check"] == "vcs_history")
    assert {key: row[key] for key in ("name", "category_id", "area_id", "a", "b", "from", "to")} == {
        "name": "Reads version-control history", "category_id": "", "area_id": "", "a": "2.1", "b": "2.2",
        "from": planted_rollouts.isoformat(), "to": planted_rollouts.isoformat(),
    }
    assert (row["rollouts_a"], row["rollouts_b"], row["signals_a"], row["signals_b"], row["down_a"], row["down_b"]) == (
        "1000", "1000", "3", "41", "3", "41",
    )
    assert (row["rate_a"], row["rate_b"], row["difference"]) == ("0.003", "0.041", "0.038")
    assert (row["tested"], row["significant"], row["direction"]) == ("True", "True", "worse")
    assert float(row["p_adjusted"]) < 0.05 and float(row["ci_low"]) > 0
    quiet = next(row for row in rows if row["check"] == "destructive")
    assert (quiet["down_a"], quiet["down_b"], quiet["tested"], quiet["significant"]) == ("0", "0", "False", "False")


@pytest.mark.parametrize(
    ("query", "status", "body"),
    [
        ({"b": ""}, 422, {"error": "b: pick the model version to compare with it (b)", "field": "b"}),
        ({"b": "9.9"}, 404, {"error": "b: no feedback for model version '9.9'", "field": "b"}),
        ({"b": "2.1"}, 422, {"error": "b: compare two different versions or variants; a and b are the same", "field": "b"}),
        ({"from": "2026-13-01"}, 422, {"error": "from: '2026-13-01' is not a date; use YYYY-MM-DD", "field": "from"}),
        ({"format": "xml"}, 422, {"error": "format: must be 'json' or 'csv'", "field": "format"}),
    ],
)
def test_the_compare_api_still_refuses_bad_parameters_with_the_same_messages(planted_rollouts, query, status, body):
    client = client_for(user_make("rita", "reviewer"))
    response = client.get("/api/v1/compare", api_query(planted_rollouts) | query)
    assert response.status_code == status and response.json() == body
