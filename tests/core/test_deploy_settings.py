"""Production settings pass Django's deployment checks; bad values stop start-up."""

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRODUCTION = {
    "DEBUG": "0",
    "SECURE_COOKIES": "1",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "ALLOWED_HOSTS": "feedback.example.com",
}


# What this process has and a deployment does not: the browser tests allow
# async-unsafe calls, pytest.ini asks for plain http and uncollected static files.
NOT_FROM_A_DEPLOYMENT = ("DJANGO_ALLOW_ASYNC_UNSAFE", "PLAIN_HTTP", "STATIC_COLLECTED", "STATIC_ROOT")


def manage(*args, **env):
    base = {key: value for key, value in os.environ.items() if key not in NOT_FROM_A_DEPLOYMENT}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**base, **env},
    )


def test_production_settings_pass_check_deploy_at_warning_level(tmp_path):
    result = manage("check", "--deploy", "--fail-level", "WARNING",
                    SECRET_KEY=secrets.token_urlsafe(50), DATA_DIR=str(tmp_path), **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def settings_of(tmp_path, **env) -> dict:
    shown = (
        "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_PROXY_SSL_HEADER", "STATIC_ROOT",
    )
    code = (
        "import json; from django.conf import settings as s; "
        f"print(json.dumps({{name: str(getattr(s, name)) if name == 'STATIC_ROOT' else getattr(s, name) for name in {shown!r}}} "
        "| {'STATIC_STORAGE': s.STORAGES['staticfiles']['BACKEND'], 'MIDDLEWARE': s.MIDDLEWARE}))"
    )
    result = manage("shell", "-c", code, DATA_DIR=str(tmp_path), **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_debug_off_alone_is_a_configuration_that_passes_check_deploy(tmp_path):
    # Only what any deployment must set: no TLS flags.
    result = manage("check", "--deploy", "--fail-level", "WARNING", DEBUG="0",
                    SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="feedback.example.com", DATA_DIR=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_debug_off_means_secure_cookies_https_only_hsts_and_collected_static_files(tmp_path):
    values = settings_of(tmp_path, DEBUG="0", SECRET_KEY="x")
    assert values["SESSION_COOKIE_SECURE"] is True and values["CSRF_COOKIE_SECURE"] is True
    assert values["SECURE_SSL_REDIRECT"] is True
    assert values["SECURE_HSTS_SECONDS"] == 31536000 and values["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    # gunicorn decides which proxy to believe (FORWARDED_ALLOW_IPS); Django would believe anyone.
    assert values["SECURE_PROXY_SSL_HEADER"] is None
    assert values["STATIC_STORAGE"] == "whitenoise.storage.CompressedManifestStaticFilesStorage"
    assert values["MIDDLEWARE"][:2] == ["django.middleware.security.SecurityMiddleware",
                                        "whitenoise.middleware.WhiteNoiseMiddleware"]


def test_plain_http_opts_out_and_the_deployment_checks_then_say_so(tmp_path):
    values = settings_of(tmp_path, DEBUG="0", SECRET_KEY="x", PLAIN_HTTP="1")
    assert values["SESSION_COOKIE_SECURE"] is False and values["CSRF_COOKIE_SECURE"] is False
    assert values["SECURE_SSL_REDIRECT"] is False and values["SECURE_HSTS_SECONDS"] == 0
    result = manage("check", "--deploy", "--fail-level", "WARNING", DEBUG="0", PLAIN_HTTP="1",
                    SECRET_KEY=secrets.token_urlsafe(50), DATA_DIR=str(tmp_path))
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr, warning


def test_make_runs_debug_mode_serves_plain_http_from_the_source_folders(tmp_path):
    values = settings_of(tmp_path, DEBUG="1", SECRET_KEY="")
    assert values["SESSION_COOKIE_SECURE"] is False and values["SECURE_SSL_REDIRECT"] is False
    assert values["SECURE_HSTS_SECONDS"] == 0
    assert values["STATIC_STORAGE"] == "django.contrib.staticfiles.storage.StaticFilesStorage"


def test_a_single_setting_given_still_wins_over_the_defaults(tmp_path):
    values = settings_of(tmp_path, DEBUG="0", SECRET_KEY="x", SECURE_HSTS_SECONDS="3600", STATIC_ROOT=str(tmp_path / "s"))
    assert values["SECURE_HSTS_SECONDS"] == 3600 and values["SECURE_SSL_REDIRECT"] is True
    assert values["STATIC_ROOT"] == str(tmp_path / "s")
    values = settings_of(tmp_path, DEBUG="0", SECRET_KEY="x", PLAIN_HTTP="1", SECURE_COOKIES="1")
    assert values["SESSION_COOKIE_SECURE"] is True and values["SECURE_SSL_REDIRECT"] is False


def test_the_production_start_refuses_settings_that_fail_the_deployment_checks(tmp_path):
    static_root = tmp_path / "static"
    result = manage("serve", DEBUG="0", PLAIN_HTTP="1", SECRET_KEY=secrets.token_urlsafe(50),
                    DATA_DIR=str(tmp_path), STATIC_ROOT=str(static_root))
    assert result.returncode != 0
    assert "SystemCheckError" in result.stderr and "security.W008" in result.stderr
    assert not static_root.exists()  # stopped before collecting anything, let alone serving


def test_without_a_secret_key_and_debug_off_start_up_fails_loudly(tmp_path):
    result = manage("check", SECRET_KEY="", DEBUG="0", DATA_DIR=str(tmp_path))
    assert result.returncode != 0
    assert "SECRET_KEY is required when DEBUG is off" in result.stderr


def test_a_malformed_setting_names_the_variable(tmp_path):
    result = manage("check", SECRET_KEY="x", DATA_DIR=str(tmp_path), WEBHOOK_MAX_BATCH_EVENTS="lots")
    assert result.returncode != 0
    assert "WEBHOOK_MAX_BATCH_EVENTS must be an integer, got 'lots'" in result.stderr
    result = manage("check", SECRET_KEY="x", DATA_DIR=str(tmp_path), PLAIN_HTTP="sometimes")
    assert result.returncode != 0
    assert "PLAIN_HTTP must be a boolean (true/false), got 'sometimes'" in result.stderr


def test_a_setting_out_of_its_range_stops_start_up(tmp_path):
    for name, value, message in [
        ("CLUSTER_MIN_CLUSTER_SIZE", "0", "CLUSTER_MIN_CLUSTER_SIZE must be between 1 and 10000, got 0"),
        ("CLUSTER_MERGE_THRESHOLD", "nan", "CLUSTER_MERGE_THRESHOLD must be between 0.001 and 1.0, got nan"),
    ]:
        result = manage("check", SECRET_KEY="x", DATA_DIR=str(tmp_path), **{name: value})
        assert result.returncode != 0, name
        assert message in result.stderr
