"""Every page carries a Content-Security-Policy without inline scripts, and the usual headers."""

import re

import pytest

from tests.factories import signed_in, user_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewer(client):
    return signed_in(client, user_make("rev", "reviewer"))


@pytest.mark.parametrize("url", ["/login/", "/", "/search/", "/reports/new"])
def test_pages_forbid_inline_and_foreign_scripts(client, reviewer, url):
    response = client.get(url)
    policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in policy
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Referrer-Policy"] == "same-origin"


@pytest.mark.parametrize("url", ["/login/", "/", "/search/", "/reports/new"])
def test_pages_contain_no_inline_script(client, reviewer, url):
    html = client.get(url).content.decode()
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "src=" in tag or 'type="application/json"' in tag, tag
    assert not re.search(r"\son[a-z]+=\"", html)  # no onclick= style handlers


@pytest.mark.parametrize(
    ("url", "content_type"),
    [("/static/css/app.css", "text/css"), ("/static/vendor/htmx-2.0.8.min.js", "text/javascript")],
)
def test_static_files_answer_with_debug_off_and_carry_nosniff(client, url, content_type):
    # WhiteNoise answers inside the middleware stack, so the security headers still apply.
    response = client.get(url)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith(content_type)
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert b"".join(response.streaming_content)
    assert client.get("/static/css/no-such-file.css").status_code == 404
    assert client.get("/login/").status_code == 200
