"""The reviewer and the admin as user objects, for modules that log them in themselves.

tests/conftest.py's fixtures of the same names are logged-in clients; a module that
imports these (`from tests.factories.people import admin, reviewer  # noqa: F401`)
gets the users instead.
"""

import pytest

from tests.factories import user_make


@pytest.fixture
def reviewer():
    return user_make("rita", "reviewer")


@pytest.fixture
def admin():
    return user_make("ada", "admin")
