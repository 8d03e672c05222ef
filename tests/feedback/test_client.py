"""client/feedback_studio_client.py against real servers: the Django live server, gunicorn, and flaky ones in between.

The client is standard-library only; it must sign exactly as the server
verifies, retry what is worth retrying, and keep one id per event so that a
retry after a lost answer stores nothing twice. The README's curl/openssl
snippet (client/examples/send_event.sh) is run here too.
"""

import json
import os
import subprocess
import time
import uuid
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest
import standardwebhooks
from django.urls import get_resolver

from client.feedback_studio_client import FeedbackStudioClient, FeedbackStudioError
from feedback.models import FeedbackItem
from tests.factories import rating_event, source_make
from tests.servers import database_url, gunicorn_serving, http_serve, http_stop

ROOT = Path(__file__).resolve().parents[2]


def event(**overrides):
    return rating_event(id=f"evt_{uuid.uuid4().hex}", **overrides)


class Flaky:
    """A real HTTP server in front of `upstream`: each POST gets what `plan` says for its turn.

    "drop": forward it, let the upstream store it, then close the connection without an answer (a lost answer);
    an int, or (int, Retry-After): answer that status without forwarding; "pass": forward and relay the answer.
    """

    def __init__(self, upstream: str | None, plan: list) -> None:
        self.plan, self.requests = list(plan), []
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                # Header names in lower case: urllib sends "Webhook-id", and names are case-insensitive anyway.
                headers = {key.lower(): value for key, value in self.headers.items()}
                flaky.requests.append({"headers": headers, "body": body, "at": time.monotonic()})
                step = flaky.plan.pop(0) if flaky.plan else "pass"
                if isinstance(step, (int, tuple)):
                    status, retry_after = step if isinstance(step, tuple) else (step, None)
                    answer = json.dumps({"error": "try again later"}).encode()
                    self.send_response(status)
                    if retry_after:
                        self.send_header("Retry-After", retry_after)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                    return
                forwarded = httpx.post(
                    upstream + self.path,
                    content=body,
                    headers={key: value for key, value in self.headers.items() if key.lower().startswith(("webhook-", "content-type"))},
                    timeout=10,
                )
                if step == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.send_response(forwarded.status_code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(forwarded.content)))
                self.end_headers()
                self.wfile.write(forwarded.content)

            def log_message(self, *args):
                pass

        self.server = http_serve(Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def close(self):
        http_stop(self.server)


@pytest.fixture
def flaky():
    made = []

    def make(upstream, plan):
        made.append(Flaky(upstream, plan))
        return made[-1]

    yield make
    for one in made:
        one.close()


@pytest.fixture(autouse=True)
def urls_loaded():
    # The live server runs in this process: load the URL configuration (and every view module) before the
    # client's first request, so the first answer does not wait on imports.
    get_resolver().url_patterns


def sender(base_url, source, secret, **kwargs):
    slept = []
    client = FeedbackStudioClient(base_url, source=source.slug, secret=secret, sleep=slept.append, **kwargs)
    return client, slept


# --- Against the Django live server --------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_it_sends_one_event_and_sending_it_again_is_a_duplicate(live_server):
    source, secret = source_make("product")
    client, slept = sender(live_server.url, source, secret)
    sent = event(comment="It ran the tests but claimed success")
    first = client.send_event(sent)
    assert (first.status, first.attempts, first.duplicate) == (202, 1, False)
    again = client.send_event(sent)
    assert (again.status, again.duplicate) == (202, True)
    item = FeedbackItem.objects.get(source=source)
    assert item.external_id == sent["id"] and item.comment == "It ran the tests but claimed success"
    assert slept == []


@pytest.mark.django_db(transaction=True)
def test_an_event_without_an_id_gets_one_before_the_first_attempt_so_a_lost_answer_stores_one_item(live_server, flaky):
    source, secret = source_make("product")
    proxy = flaky(live_server.url, ["drop"])
    client, slept = sender(proxy.url, source, secret)
    sent = event()
    del sent["id"]
    response = client.send_event(sent)
    # The first attempt was stored but its answer lost; the retry is recognised as the same event.
    assert (response.status, response.attempts, response.duplicate) == (202, 2, True)
    assert FeedbackItem.objects.filter(source=source).count() == 1
    first, second = proxy.requests
    assert first["body"] == second["body"] and first["headers"]["webhook-id"] == second["headers"]["webhook-id"]
    assert json.loads(first["body"])["id"] == first["headers"]["webhook-id"]
    assert len(slept) == 1


@pytest.mark.django_db(transaction=True)
def test_5xx_and_429_are_retried_with_backoff_and_each_attempt_is_signed_afresh(live_server, flaky):
    source, secret = source_make("product")
    proxy = flaky(live_server.url, [503, 502, (429, "2")])
    client, slept = sender(proxy.url, source, secret, backoff=0.5, max_backoff=30)
    response = client.send_event(event())
    assert (response.status, response.attempts) == (202, 4)
    # Doubling from 0.5 s, with jitter (half to all of it); the 429's Retry-After of 2 s wins over the backoff.
    assert len(slept) == 3
    assert 0.25 <= slept[0] <= 0.5 and 0.5 <= slept[1] <= 1.0 and slept[2] == 2.0
    for request in proxy.requests:
        standardwebhooks.Webhook(secret).verify(request["body"], request["headers"])
    assert FeedbackItem.objects.filter(source=source).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_server_that_keeps_failing_raises_after_the_last_attempt(live_server, flaky):
    source, secret = source_make("product")
    proxy = flaky(live_server.url, [500, 500, 500])
    client, slept = sender(proxy.url, source, secret, max_attempts=3)
    with pytest.raises(FeedbackStudioError) as raised:
        client.send_event(event())
    assert raised.value.status == 500 and raised.value.error == "try again later"
    assert len(proxy.requests) == 3 and len(slept) == 2
    assert not FeedbackItem.objects.filter(source=source).exists()


def test_no_server_at_all_is_retried_then_raised_as_unreachable():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    slept = []
    client = FeedbackStudioClient(
        f"http://127.0.0.1:{port}", source="product", secret="whsec_" + "A" * 44, max_attempts=3, sleep=slept.append
    )
    with pytest.raises(FeedbackStudioError) as raised:
        client.send_event(event())
    assert raised.value.status is None and raised.value.error.startswith("could not reach the server")
    assert len(slept) == 2


@pytest.mark.django_db(transaction=True)
def test_a_4xx_is_not_retried_and_raises_with_the_servers_message_and_field(live_server):
    source, secret = source_make("product")
    other, other_secret = source_make("other")
    client, slept = sender(live_server.url, source, other_secret)
    with pytest.raises(FeedbackStudioError) as raised:
        client.send_event(event())
    assert raised.value.status == 401
    assert raised.value.error == "webhook-signature does not match the body and a current secret of this source"
    client, slept = sender(live_server.url, source, secret)
    with pytest.raises(FeedbackStudioError) as raised:
        client.send_event(event(rating=1))
    assert (raised.value.status, raised.value.field) == (422, "rating")
    assert slept == [] and not FeedbackItem.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_batches_are_split_stored_and_a_resend_is_all_duplicates(live_server):
    source, secret = source_make("product")
    client, _ = sender(live_server.url, source, secret, batch_size=500)
    events = [event(comment=f"failure number {n}") for n in range(1200)]
    summary = client.send_events(events)
    assert [response.body["accepted"] for response in summary.responses] == [500, 500, 200]
    assert (summary.accepted, summary.duplicates, summary.invalid) == (1200, 0, 0)
    again = client.send_events(events)
    assert (again.accepted, again.duplicates) == (0, 1200)
    assert FeedbackItem.objects.filter(source=source).count() == 1200


@pytest.mark.django_db(transaction=True)
def test_a_batch_with_one_bad_event_stores_the_others_and_says_which(live_server):
    source, secret = source_make("product")
    client, _ = sender(live_server.url, source, secret)
    good, bad = event(), event(rating="sideways")
    response = client.send_batch([good, bad])
    assert response.status == 207
    assert (response.body["accepted"], response.body["invalid"]) == (1, 1)
    refused = [result for result in response.body["results"] if result.get("field")]
    assert refused[0]["field"] == "events[1].rating"
    assert list(FeedbackItem.objects.filter(source=source).values_list("external_id", flat=True)) == [good["id"]]


def test_the_client_refuses_what_the_server_would_before_sending():
    client = FeedbackStudioClient("http://127.0.0.1:9", source="product", secret="whsec_" + "A" * 44)
    with pytest.raises(ValueError, match="at most 1000 events"):
        client.send_batch([event() for _ in range(1001)])
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        client.send_event(event(score=float("nan")))
    with pytest.raises(ValueError, match="whsec_"):
        FeedbackStudioClient("http://127.0.0.1:9", source="product", secret="not-a-secret")
    with pytest.raises(ValueError, match="the server takes at most"):
        client.send_event(event(comment="x" * (5 * 1024 * 1024)))


# --- Against gunicorn, the production server --------------------------------------------------------


@pytest.fixture(scope="module")
def gunicorn_url(django_db_setup, django_db_blocker, tmp_path_factory):
    with django_db_blocker.unblock():
        db_url = database_url()
    data_dir = tmp_path_factory.mktemp("client-gunicorn")
    env = dict(os.environ, DATABASE_URL=db_url, DATA_DIR=str(data_dir))
    with gunicorn_serving(env=env, log_path=data_dir / "web.log", args=("--workers", "1")) as base_url:
        yield base_url


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_client_sends_singles_and_batches_to_gunicorn_and_retries_a_lost_answer(gunicorn_url, flaky):
    source, secret = source_make("product")
    client, _ = sender(gunicorn_url, source, secret)
    assert client.send_event(event()).status == 202
    summary = client.send_events([event() for _ in range(750)])
    assert (summary.accepted, len(summary.responses)) == (750, 2)
    proxy = flaky(gunicorn_url, ["drop"])
    lost, _ = sender(proxy.url, source, secret)
    retried = lost.send_batch([event() for _ in range(20)])
    assert retried.attempts == 2 and retried.body["duplicates"] == 20
    assert FeedbackItem.objects.filter(source=source).count() == 1 + 750 + 20


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_readme_curl_and_openssl_snippet_stores_an_event_and_a_resend_is_a_duplicate(gunicorn_url):
    source, secret = source_make("product")
    script = ROOT / "client" / "examples" / "send_event.sh"
    env = dict(os.environ, BASE_URL=gunicorn_url, SOURCE=source.slug, SECRET=secret, EVENT_ID="evt_from_curl")
    first = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stderr.strip())["accepted"] == 1
    again = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and json.loads(again.stderr.strip())["duplicate"] is True
    item = FeedbackItem.objects.get(source=source)
    assert item.external_id == "evt_from_curl" and item.comment == "It edited main.py instead of utils.py"
    # A wrong secret is a 401, not retried: the script stops at once with a failure.
    wrong = subprocess.run(
        ["bash", str(script)], env=dict(env, SECRET="whsec_" + "B" * 44), capture_output=True, text=True, timeout=60
    )
    assert wrong.returncode == 1 and "webhook-signature does not match" in wrong.stderr
