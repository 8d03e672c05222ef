"""Production settings pass Django's deployment checks; bad values stop start-up."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PRODUCTION = {
    "DEBUG": "0",
    "SECURE_COOKIES": "1",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "ALLOWED_HOSTS": "feedback.example.com",
}


def manage(*args, **env):
    # The browser tests allow async-unsafe calls in this process; a deployment never does.
    base = {key: value for key, value in os.environ.items() if key != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**base, **env},
    )


def test_production_settings_pass_check_deploy_at_warning_level(tmp_path):
    result = manage("check", "--deploy", "--fail-level", "WARNING",
                    SECRET_KEY=secrets.token_urlsafe(50), DATA_DIR=str(tmp_path), **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_without_a_secret_key_and_debug_off_start_up_fails_loudly(tmp_path):
    result = manage("check", SECRET_KEY="", DEBUG="0", DATA_DIR=str(tmp_path))
    assert result.returncode != 0
    assert "SECRET_KEY is required when DEBUG is off" in result.stderr


def test_a_malformed_setting_names_the_variable(tmp_path):
    result = manage("check", SECRET_KEY="x", DATA_DIR=str(tmp_path), WEBHOOK_MAX_BATCH_EVENTS="lots")
    assert result.returncode != 0
    assert "WEBHOOK_MAX_BATCH_EVENTS must be an integer, got 'lots'" in result.stderr


def test_a_setting_out_of_its_range_stops_start_up(tmp_path):
    for name, value, message in [
        ("CLUSTER_MIN_CLUSTER_SIZE", "0", "CLUSTER_MIN_CLUSTER_SIZE must be between 1 and 10000, got 0"),
        ("CLUSTER_MERGE_THRESHOLD", "nan", "CLUSTER_MERGE_THRESHOLD must be between 0.001 and 1.0, got nan"),
    ]:
        result = manage("check", SECRET_KEY="x", DATA_DIR=str(tmp_path), **{name: value})
        assert result.returncode != 0, name
        assert message in result.stderr
