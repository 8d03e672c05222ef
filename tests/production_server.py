"""The app started as production starts it, for the tests that need a real server (no tests here).

`manage.py serve` with DEBUG off and nothing set but what a deployment sets:
its deployment checks, collectstatic into a temporary STATIC_ROOT, then
gunicorn, against the test database. gunicorn speaks TLS itself here (a
throwaway self-signed certificate), standing in for the proxy that terminates
TLS in front of it, so Secure cookies, HSTS and the https redirect work as
they do in production.
"""

import datetime
import ipaddress
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.servers import ROOT, database_url, free_port, process_stop


# What the tests set for themselves and a deployment does not: the server gets production's defaults.
LOCAL_ONLY = (
    "PLAIN_HTTP", "STATIC_COLLECTED", "SECURE_COOKIES", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS",
    "DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE", "GUNICORN_CMD_ARGS", "STATIC_ROOT",
)


@dataclass
class ProductionServer:
    url: str
    # Rows whose secrets the server must read (a source's) are written under its key.
    secret_key: str
    static_root: Path
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def production_server(django_db_setup, tmp_path_factory):
    folder = tmp_path_factory.mktemp("production")
    cert_path, key_path = self_signed_certificate(folder)
    port = free_port()
    secret_key = secrets.token_urlsafe(50)
    env = {key: value for key, value in os.environ.items() if key not in LOCAL_ONLY}
    env.update(
        SECRET_KEY=secret_key,
        ALLOWED_HOSTS="127.0.0.1",
        DATABASE_URL=database_url(),
        DATA_DIR=str(folder / "data"),
        STATIC_ROOT=str(folder / "static"),
        WEB_CONCURRENCY="1",
        GUNICORN_CMD_ARGS=f"--certfile={cert_path} --keyfile={key_path} --graceful-timeout=5",
    )
    log_path = folder / "server.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{port}"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    server = ProductionServer(
        url=f"https://127.0.0.1:{port}", secret_key=secret_key, static_root=folder / "static", log_path=log_path
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, f"the server exited with {process.returncode}:\n{server.log()}"
            try:
                if httpx.get(f"{server.url}/login/", verify=False, timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"the server did not answer within 90 s:\n{server.log()}"
            time.sleep(0.3)
        yield server
    finally:
        process_stop(process)
