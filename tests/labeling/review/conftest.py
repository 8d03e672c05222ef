"""The people, source and items these tests share (users, not logged-in clients as in tests/conftest.py)."""

import pytest

from labeling.models import Category
from tests.factories.review import admin_user, no_role_user, reviewer, second_reviewer, source  # noqa: F401
from tests.factories.review import category_make, item_make


@pytest.fixture
def model_category():
    """The category the model sorted `item` into."""
    return category_make("Edits the wrong file", size=1)


@pytest.fixture
def confirmed_category():
    """A category a reviewer confirmed, with nothing in it yet."""
    return category_make("Claims tests pass", status=Category.Status.CONFIRMED, size=0)


@pytest.fixture
def item(source, model_category):
    return item_make(source, category=model_category, confidence=0.71)
