"""The production start (`manage.py serve`, DEBUG off) serves its static files and sends its TLS headers.

A real gunicorn against the test database: see tests/production_server.py.
"""

import gzip
import json
import re

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from tests.production_server import ROOT, production_server  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

A_YEAR_OR_MORE = 365 * 24 * 3600


def client(server) -> httpx.Client:
    return httpx.Client(base_url=server.url, verify=False, timeout=10, follow_redirects=False)


def static_urls(html: str) -> list[str]:
    return re.findall(r'(?:href|src)="(/static/[^"]+)"', html)


def test_collectstatic_ran_into_the_static_root(production_server):
    manifest = json.loads((production_server.static_root / "staticfiles.json").read_text())
    assert manifest["paths"]["css/app.css"].startswith("css/app.")
    assert manifest["paths"]["vendor/htmx-2.0.8.min.js"].startswith("vendor/htmx-2.0.8.min.")


def test_pages_name_hashed_static_files_that_answer_and_are_cached_for_a_year(production_server):
    with client(production_server) as http:
        html = http.get("/login/").text
        urls = static_urls(html)
        assert any(re.fullmatch(r"/static/css/app\.[0-9a-f]{12}\.css", url) for url in urls), urls
        assert any(re.fullmatch(r"/static/vendor/htmx-2\.0\.8\.min\.[0-9a-f]{12}\.js", url) for url in urls), urls
        for url in urls:
            response = http.get(url)
            assert response.status_code == 200, url
            cache = response.headers["Cache-Control"]
            assert "immutable" in cache and int(re.search(r"max-age=(\d+)", cache).group(1)) >= A_YEAR_OR_MORE, cache
        stylesheet = next(url for url in urls if url.endswith(".css"))
        assert http.get(stylesheet).headers["Content-Type"].startswith("text/css")


def test_static_files_are_gzipped_only_when_the_client_asks(production_server):
    source = (ROOT / "static" / "vendor" / "htmx-2.0.8.min.js").read_bytes()
    with client(production_server) as http:
        url = next(url for url in static_urls(http.get("/login/").text) if "/htmx-" in url)
        with http.stream("GET", url, headers={"Accept-Encoding": "gzip"}) as compressed:
            body = b"".join(compressed.iter_raw())  # as sent, not decoded by the client
        assert compressed.headers["Content-Encoding"] == "gzip"
        assert "Accept-Encoding" in compressed.headers["Vary"]
        assert len(body) == int(compressed.headers["Content-Length"]) < len(source) / 2
        assert gzip.decompress(body) == source
        plain = http.get(url, headers={"Accept-Encoding": "identity"})
        assert "Content-Encoding" not in plain.headers and plain.content == source


def test_an_unknown_static_file_is_a_404_and_pages_still_answer(production_server):
    with client(production_server) as http:
        assert http.get("/static/css/no-such-file.css").status_code == 404
        assert http.get("/login/").status_code == 200


def test_pages_send_hsts_and_cookies_only_travel_over_https(production_server):
    with client(production_server) as http:
        response = http.get("/login/")
        assert response.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
        csrf_cookie = next(header for header in response.headers.get_list("Set-Cookie") if header.startswith("csrftoken="))
        assert "Secure" in csrf_cookie


@pytest.mark.django_db(transaction=True)  # the server reads the user from the committed test database
def test_the_session_cookie_of_a_login_is_secure_and_http_only(production_server):
    user = get_user_model().objects.create_user("rita", password="rita-password-123")
    user.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    with client(production_server) as http:
        form = http.get("/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        response = http.post(
            "/login/",
            data={"username": "rita", "password": "rita-password-123", "csrfmiddlewaretoken": token},
            headers={"Origin": production_server.url, "Referer": f"{production_server.url}/login/"},
        )
        assert response.status_code == 302, response.text[:500]
        session_cookie = next(h for h in response.headers.get_list("Set-Cookie") if h.startswith("sessionid="))
        assert "Secure" in session_cookie and "HttpOnly" in session_cookie
        overview = http.get("/")
        assert overview.status_code == 200 and "<h1>Overview</h1>" in overview.text


def test_the_api_docs_page_gets_its_bundled_swagger_files(production_server):
    with client(production_server) as http:
        response = http.get("/api/docs")
        assert response.status_code == 200
        urls = static_urls(response.text)
        assert any("/ninja/" in url for url in urls), urls
        for url in urls:
            assert http.get(url).status_code == 200, url
