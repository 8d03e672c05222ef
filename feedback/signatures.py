"""Standard Webhooks signing and verification (design.md, "Contracts").

The signed content is ``{webhook-id}.{webhook-timestamp}.{raw body}``; the
signature header holds one or more space-separated ``v1,<base64 HMAC-SHA256>``
entries so a sender can sign with two secrets while it rotates.
"""

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Iterable

SECRET_PREFIX = "whsec_"


class SignatureError(Exception):
    """Why a delivery's signature or timestamp was refused (a one-line message)."""


def secret_generate() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key inside a ``whsec_<base64>`` secret."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("a signing secret starts with whsec_")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except binascii.Error:
        raise ValueError("a signing secret is whsec_ followed by base64") from None
    if len(key) < 16:
        raise ValueError("a signing secret holds at least 16 bytes")
    return key


def sign(*, secret: str, msg_id: str, timestamp: int | str, body: bytes) -> str:
    """The ``v1,<base64>`` signature a sender puts in ``webhook-signature``."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify(
    *,
    secrets_to_try: Iterable[str],
    msg_id: str,
    timestamp: str,
    signature_header: str,
    body: bytes,
    now: float,
    tolerance_seconds: int,
) -> None:
    """Raise SignatureError unless one signature matches one secret in time."""
    try:
        sent_at = int(timestamp)
    except ValueError:
        raise SignatureError("webhook-timestamp must be whole seconds since the epoch") from None
    if sent_at < now - tolerance_seconds:
        raise SignatureError("webhook-timestamp is too old (more than 5 minutes); refusing a possible replay")
    if sent_at > now + tolerance_seconds:
        raise SignatureError("webhook-timestamp is too far in the future (more than 5 minutes)")

    offered = [part.split(",", 1)[1] for part in signature_header.split() if part.startswith("v1,")]
    if not offered:
        raise SignatureError("webhook-signature holds no v1 signature")
    for secret in secrets_to_try:
        expected = sign(secret=secret, msg_id=msg_id, timestamp=timestamp, body=body).split(",", 1)[1]
        # Compare every candidate in constant time; stop only on a match.
        if any(hmac.compare_digest(expected.encode(), candidate.encode()) for candidate in offered):
            return
    raise SignatureError("webhook-signature does not match the body and a current secret of this source")
