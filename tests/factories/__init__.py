"""Helpers that build signed deliveries and stored rows for the tests."""

import json
import time
import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from feedback import services
from feedback.models import Source
from feedback.signatures import sign


def source_make(name: str = "product") -> tuple[Source, str]:
    return services.source_create(name=name)


def rating_event(**overrides: Any) -> dict[str, Any]:
    event = {
        "id": f"evt_{uuid.uuid4().hex[:12]}",
        "type": "feedback.rating",
        "occurred_at": "2026-11-29T12:00:00Z",
        "rating": "down",
        "comment": "It edited the wrong file.",
        "model": {"name": "coder", "version": "2.1"},
        "variant": "A",
        "surface": "ide",
        "user_ref": "u_123",
        "context": {
            "messages": [{"role": "user", "content": "Rename foo to bar in utils.py"}],
            "output": "I renamed foo in main.py.",
            "tool_calls": [{"name": "edit_file", "arguments": {"path": "main.py"}}],
        },
    }
    event.update(overrides)
    return event


def signed_headers(
    secret: str, body: bytes, *, msg_id: str | None = None, timestamp: int | None = None
) -> dict[str, str]:
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    timestamp = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret=secret, msg_id=msg_id, timestamp=timestamp, body=body),
    }


def wsgi_environ(method: str, path: str, stream, headers: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """A WSGI request as a server hands it over: `stream` as wsgi.input, `headers` as HTTP_* keys, `extra` on top."""
    return {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "CONTENT_TYPE": "application/json",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "wsgi.input": stream,
        "wsgi.url_scheme": "http",
        **{f"HTTP_{name.upper().replace('-', '_')}": value for name, value in (headers or {}).items()},
        **extra,
    }


def post_signed(client, source: Source, secret: str, payload: Any, *, msg_id: str | None = None, **kwargs):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    if msg_id is None and isinstance(payload, dict) and "events" not in payload:
        msg_id = payload.get("id")
    headers = signed_headers(secret, body, msg_id=msg_id, **kwargs)
    return client.post(
        f"/api/v1/sources/{source.slug}/events", data=body, content_type="application/json", headers=headers
    )


def user_make(username: str = "u", *roles: str):
    """A user with the given roles (groups), password ``pw-<username>-123``."""
    user = get_user_model().objects.create_user(username, password=f"pw-{username}-123")
    for role in roles:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def signed_in(client: Client, user):
    """`user`, with the test's own client logged in as them."""
    client.force_login(user)
    return user


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def celery_broker_use(url: str, transport_options: dict | None = None) -> None:
    """Point this process's Celery at another broker, dropping every pooled connection."""
    import kombu.pools

    from config.celery import app as celery_app

    celery_app.conf.broker_url = url
    if transport_options is not None:
        celery_app.conf.broker_transport_options = transport_options
    celery_app.pool.force_close_all()
    celery_app._pool = None
    celery_app.amqp._producer_pool = None
    kombu.pools.reset()
