from tests.factories import user_make
"""Shared makers for the review tests (no tests here).

Kept under tests/test_review_* because that is the review work's corner of
the test tree; pytest collects this module and finds nothing to run.
"""

import uuid

import numpy as np
import pytest
from django.utils import timezone

from feedback import services as feedback_services
from feedback.models import Embedding, FeedbackItem
from labeling.models import Assignment, Category

PASSWORD = "review-password-123"


def unit_vector(seed: int, dimensions: int = 384) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(dimensions).astype(np.float32)
    return vector / np.linalg.norm(vector)


def category_make(name: str, *, status: str = Category.Status.PROPOSED, centroid=None, size: int = 0) -> Category:
    return Category.objects.create(
        name=name,
        status=status,
        size=size,
        centroid=None if centroid is None else np.asarray(centroid, dtype=np.float32).tobytes(),
    )


def item_make(source, *, vector=None, category: Category | None = None, confidence: float = 0.8, **fields):
    """A stored thumbs-down rating (overridable), optionally embedded and assigned by the model."""
    values = {
        "external_id": f"evt_{uuid.uuid4().hex[:12]}",
        "kind": FeedbackItem.Kind.RATING,
        "rating": -1,
        "comment": "It edited the wrong file.",
        "context": {"messages": [{"role": "user", "content": "Rename foo in utils.py"}], "output": "Done."},
        "model_name": "coder",
        "model_version": "2.1",
        "variant": "A",
        "occurred_at": timezone.now(),
        "receipt_id": uuid.uuid4(),
        "status": FeedbackItem.Status.EMBEDDED,
    }
    values.update(fields)
    if vector is not None:
        values["embedding"] = Embedding.objects.create(
            content_hash=uuid.uuid4().hex, model_name="test", vector=np.asarray(vector, dtype=np.float32).tobytes()
        )
    item = FeedbackItem.objects.create(source=source, **values)
    if category is not None:
        Assignment.objects.create(item=item, category=category, confidence=confidence)
        item.status = FeedbackItem.Status.ASSIGNED
        item.save(update_fields=["status"])
    return item


@pytest.fixture
def source(db):
    return feedback_services.source_create(name="product")[0]


@pytest.fixture
def reviewer(db):
    return user_make("rita", "reviewer")


@pytest.fixture
def second_reviewer(db):
    return user_make("sam", "reviewer")


@pytest.fixture
def admin_user(db):
    return user_make("ada", "admin")


@pytest.fixture
def no_role_user(db):
    return user_make("nora")
