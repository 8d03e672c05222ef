"""Webhook secrets and API tokens never reach the logs."""

import io
import json
import logging

import pytest
from django.core.management import call_command

from feedback.models import Source
from tests.factories import post_signed, rating_event

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_full_ingest_run_logs_neither_the_secret_nor_the_token(client, caplog):
    caplog.set_level(logging.DEBUG)
    out = io.StringIO()
    call_command("source_create", "leaky-product", stdout=out)
    printed = dict(line.split(": ", 1) for line in out.getvalue().splitlines())
    secret, token = printed["secret"], printed["token"]
    source = Source.objects.get(slug="leaky-product")

    post_signed(client, source, secret, rating_event(id="ok-1"))
    post_signed(client, source, secret, {"events": [rating_event(id="ok-2"), rating_event(id="bad", rating=3)]})
    post_signed(client, source, "whsec_" + "A" * 44, rating_event(id="forged"))  # 401
    headers = {"Authorization": f"Bearer {token}"}
    client.post("/api/v1/reports", data=json.dumps({"title": "t", "what_happened": "w"}),
                content_type="application/json", headers=headers)
    client.post("/api/v1/reports", data="{bad json", content_type="application/json", headers=headers)

    assert caplog.records, "the run logged nothing at all; the test would prove nothing"
    logged = caplog.text
    for value in (secret, secret.removeprefix("whsec_"), token):
        assert value not in logged
