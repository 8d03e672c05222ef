"""Secrets the app must read back, webhook signing secrets, are stored encrypted.

An HMAC secret cannot be stored as a hash: verifying a signature needs the
secret itself. So it is encrypted with Fernet (AES-128-CBC and HMAC-SHA256)
under a key derived from SECRET_KEY; a database dump or backup alone does not
give anyone the power to sign webhooks. After SECRET_KEY is rotated, the old
key in SECRET_KEY_FALLBACKS still decrypts, and `manage.py
encrypt_secrets` stores every secret under the new key.
"""

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.db import models

PREFIX = "enc1:"


class SecretUnreadable(Exception):
    """A stored secret was encrypted under a key this process does not have."""


def _fernet_key(secret_key: str) -> bytes:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"feedback webhook secrets").derive(
        secret_key.encode()
    )
    return base64.urlsafe_b64encode(derived)


@lru_cache(maxsize=4)
def _box(keys: tuple[str, ...]) -> MultiFernet:
    # The first key encrypts; all of them are tried to decrypt.
    return MultiFernet([Fernet(_fernet_key(key)) for key in keys])


def _keys() -> tuple[str, ...]:
    return (settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS)


def encrypt(plain: str) -> str:
    return PREFIX + _box(_keys()).encrypt(plain.encode()).decode()


def decrypt(stored: str) -> str:
    """The plain secret; a value without the prefix is one stored before encryption and is returned as is."""
    if not stored.startswith(PREFIX):
        return stored
    return _decrypt(stored, _keys())


@lru_cache(maxsize=1024)
def _decrypt(stored: str, keys: tuple[str, ...]) -> str:
    # Cached: every webhook delivery reads its source's secrets.
    try:
        return _box(keys).decrypt(stored[len(PREFIX) :].encode()).decode()
    except InvalidToken:
        raise SecretUnreadable(
            "a stored webhook secret cannot be decrypted with SECRET_KEY: if the key was changed, "
            "put the old one in SECRET_KEY_FALLBACKS"
        ) from None


class EncryptedSecretField(models.CharField):
    """A CharField whose value is encrypted in the database and plain in Python."""

    def from_db_value(self, value, expression, connection):
        return decrypt(value) if value else value

    def value_to_string(self, obj):
        # Serialisation (dumpdata) writes the ciphertext: a fixture is a dump too.
        value = self.value_from_object(obj)
        return encrypt(value) if value else value

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        if not value or value.startswith(PREFIX):
            return value
        return encrypt(value)
