"""GET /api/v1/compare: the comparison as JSON and CSV, who may ask, and every error in the {error, field} shape."""

import csv
import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from feedback import services
from feedback.models import Source
from tests.factories import signed_in, user_make
from tests.factories.compare import END, START, planted_data

pytestmark = pytest.mark.django_db

URL = "/api/v1/compare"
QUERY = {"a": "1.0", "b": "1.1", "from": str(START), "to": str(END)}


@pytest.fixture
def reviewer(client):
    return signed_in(client, user_make("rev", "reviewer"))


@pytest.fixture
def token() -> str:
    source = Source.objects.first() or services.source_create(name="reader")[0]
    return services.api_token_create(source=source, name="dashboards", scopes=["compare"])[1]


def test_the_json_answer_carries_both_sides_and_the_hand_computed_figures(client, reviewer):
    cats = planted_data()
    response = client.get(URL, QUERY)
    assert response.status_code == 200 and response["Content-Type"].startswith("application/json")
    data = response.json()
    assert (data["a"]["spec"], data["b"]["spec"], data["from"], data["to"]) == ("1.0", "1.1", "2026-11-02", "2026-11-15")
    assert (data["a"]["ratings"], data["b"]["ratings"], data["b"]["reports"]) == (200, 200, 1)
    assert data["a"]["up_rate"] == 0.7 and data["a"]["up_rate_ci"] == [0.633209, 0.759253]
    assert "all ratings (up and down) of that side" in data["denominator"]
    assert (data["correction"], data["interval"], data["alpha"], data["tested"]) == ("holm", "newcombe-hybrid-score", 0.05, 4)
    assert data["overall"] == {"up_rate_difference": -0.3, "ci": [-0.388246, -0.203851], "p_value": pytest.approx(1.64e-09, rel=1e-2)}
    rows = {row["name"]: row for row in data["categories"]}
    regressed = rows["Regressed"]
    assert regressed == {
        "category_id": cats["Regressed"].id, "name": "Regressed", "status": "confirmed",
        "signals_a": 10, "signals_b": 41, "down_a": 10, "down_b": 40, "rate_a": 0.05, "rate_b": 0.2,
        "difference": 0.15, "ci_low": 0.086585, "ci_high": 0.214922, "z": 4.5356,
        "p_value": pytest.approx(5.74e-06, rel=1e-2), "p_adjusted": pytest.approx(2.298e-05, rel=1e-3),
        "tested": True, "significant": True, "direction": "worse", "is_new": False, "is_gone": False,
        "items_a_url": f"/search/?category={cats['Regressed'].id}&model_version=1.0&rating=down&date_from=2026-11-02&date_to=2026-11-15",
        "items_b_url": f"/search/?category={cats['Regressed'].id}&model_version=1.1&rating=down&date_from=2026-11-02&date_to=2026-11-15",
    }
    assert rows["Unchanged"]["significant"] is False and rows["Rare"]["tested"] is False
    assert rows["Brand new"]["is_new"] is True
    assert [row["name"] for row in data["categories"]][0] == "Regressed"
    assert data["series"]["bucket"] == "day" and len(data["series"]["buckets"]) == 14
    assert [line["label"] for line in data["series"]["lines"]] == ["1.0", "1.1"]


def test_the_csv_answer_has_one_row_per_category_that_stands_alone(client, reviewer):
    planted_data()
    response = client.get(URL, QUERY | {"format": "csv"})
    assert response.status_code == 200 and response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="compare_1.0_vs_1.1_2026-11-02_2026-11-15.csv"'
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    # The categories, then one row per built-in rollout check (none of these items has tool calls: nothing to test).
    checks = [row for row in rows if row["level"] == "check"]
    rows = [row for row in rows if row["level"] != "check"]
    assert [row["name"] for row in rows] == ["Regressed", "Borderline", "Brand new", "Rare", "Unchanged", "Gone"]
    assert len(checks) == 6 and all(row["rollouts_a"] == row["rollouts_b"] == "0" and row["tested"] == "False" for row in checks)
    first = rows[0]
    assert {key: first[key] for key in ("a", "b", "from", "to", "ratings_a", "ratings_b", "down_a", "down_b")} == {
        "a": "1.0", "b": "1.1", "from": "2026-11-02", "to": "2026-11-15", "ratings_a": "200", "ratings_b": "200",
        "down_a": "10", "down_b": "40",
    }
    assert (first["rate_a"], first["rate_b"], first["difference"], first["ci_low"], first["ci_high"]) == (
        "0.05", "0.2", "0.15", "0.086585", "0.214922",
    )
    assert (first["tested"], first["significant"], first["direction"], first["is_new"]) == ("True", "True", "worse", "False")
    assert rows[3]["p_adjusted"] == "" and rows[3]["tested"] == "False"  # Rare: too few to test


def test_a_category_name_that_looks_like_a_formula_is_defused_in_csv(client, reviewer):
    cats = planted_data()
    cats["Gone"].name = "=HYPERLINK(1)"
    cats["Gone"].save()
    body = client.get(URL, QUERY | {"format": "csv"}).content.decode()
    assert ",'=HYPERLINK(1)," in body


def test_a_bearer_token_is_enough(client, token):
    planted_data()
    response = client.get(URL, QUERY, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200 and response.json()["b"]["ratings"] == 200


def test_a_bad_token_is_refused_even_beside_a_session(client, reviewer):
    planted_data()
    response = client.get(URL, QUERY, headers={"Authorization": "Bearer fbk_nope"})
    assert response.status_code == 401 and set(response.json()) <= {"error", "field"}


def test_a_revoked_token_is_refused(client, token):
    from feedback.models import ApiToken

    ApiToken.objects.update(revoked_at=timezone.now() - timedelta(minutes=1))
    response = client.get(URL, QUERY, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401


def test_without_a_session_or_token_it_answers_401(client):
    planted_data()
    response = client.get(URL, QUERY)
    assert response.status_code == 401
    assert response.json() == {"error": "log in, or send 'Authorization: Bearer <token>'"}


def test_a_session_without_the_reviewer_role_answers_403(client):
    client.force_login(get_user_model().objects.create_user("staff", password="pw-123-pw"))
    response = client.get(URL, QUERY)
    assert response.status_code == 403 and response.json() == {"error": "comparisons need the reviewer role"}


@pytest.mark.parametrize(
    ("query", "status", "field"),
    [
        ({"a": "7.7"}, 404, "a"),
        ({"b": "7.7"}, 404, "b"),
        ({"b": "1.1:Z"}, 404, "b"),
        ({"a": ""}, 422, "a"),
        ({"b": ""}, 422, "b"),
        ({"b": "1.0"}, 422, "b"),
        ({"from": "2026-13-01"}, 422, "from"),
        ({"to": "15/11/2026"}, 422, "to"),
        ({"from": "2026-11-20", "to": "2026-11-02"}, 422, "to"),
        ({"bucket": "hour"}, 422, "bucket"),
        ({"format": "xml"}, 422, "format"),
    ],
)
def test_errors_answer_in_the_shared_shape_with_the_field_at_fault(client, reviewer, query, status, field):
    planted_data()
    response = client.get(URL, QUERY | query)
    assert response.status_code == status
    body = response.json()
    assert set(body) == {"error", "field"} and body["field"] == field and body["error"].startswith(f"{field}:")


def test_the_openapi_document_describes_the_comparison(client):
    document = client.get("/api/openapi.json").json()
    operation = document["paths"]["/api/v1/compare"]["get"]
    assert {parameter["name"] for parameter in operation["parameters"]} == {"a", "b", "from", "to", "bucket", "format"}
    assert {"200", "401", "403", "404", "422"} <= set(operation["responses"])
    assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/csv"}
    assert "from" in document["components"]["schemas"]["CompareOut"]["properties"]
