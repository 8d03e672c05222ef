"""/api/openapi.json and /api/docs describe the API."""

import pytest

pytestmark = pytest.mark.django_db


def test_the_openapi_document_describes_both_ingestion_endpoints(client):
    document = client.get("/api/openapi.json").json()
    events = document["paths"]["/api/v1/sources/{slug}/events"]["post"]
    body_schemas = events["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
    assert {"$ref": "#/components/schemas/RatingEvent"} in body_schemas
    assert {"$ref": "#/components/schemas/EventBatch"} in body_schemas
    assert {"202", "207", "400", "401", "404", "413", "422"} <= set(events["responses"])
    reports = document["paths"]["/api/v1/reports"]["post"]
    assert reports["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ReportIn"}
    assert {"201", "200", "401", "422"} <= set(reports["responses"])
    schemas = document["components"]["schemas"]
    assert {"RatingEvent", "RatedContext", "Message", "ErrorOut", "IngestOut", "ReportIn"} <= set(schemas)
    assert schemas["RatingEvent"]["properties"]["rating"]["enum"] == ["up", "down"]


def test_the_docs_page_serves_vendored_assets(client):
    response = client.get("/api/docs")
    assert response.status_code == 200
    assert b"/static/ninja/swagger-ui-bundle.js" in response.content
    assert b"cdn." not in response.content
