"""The people and the source these tests share (users, not logged-in clients as in tests/conftest.py)."""

from tests.factories.review import admin_user, no_role_user, reviewer, second_reviewer, source  # noqa: F401
