"""The embedding step with the real model: shared vectors, empty texts, failures, assignment."""

import numpy as np
import pytest
from django.utils import timezone

from config.celery import app as celery_app
from feedback import embedder, selectors
from feedback import pipeline
from feedback.text import EMBED_RECIPE
from feedback.models import Embedding, FeedbackItem
from labeling.models import Assignment, Category
from tests.factories import post_signed, rating_event, source_make


@pytest.fixture
def eager():
    """Run queued tasks in-process, as a worker would, right after commit."""
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def make_item(source, external_id, **fields):
    defaults = dict(kind="rating", rating=-1, occurred_at=timezone.now(), receipt_id="00000000-0000-0000-0000-000000000000")
    return FeedbackItem.objects.create(source=source, external_id=external_id, **(defaults | fields))


@pytest.mark.django_db
def test_equal_texts_are_embedded_once_and_share_a_vector():
    source, _ = source_make()
    items = [make_item(source, f"e{i}", comment="It edited the wrong file") for i in range(3)]
    other = make_item(source, "other", comment="It asked me five questions before doing anything")
    pipeline.items_embed(item_ids=[item.id for item in items + [other]])
    assert Embedding.objects.count() == 2
    embedded = FeedbackItem.objects.filter(id__in=[item.id for item in items])
    assert {item.embedding_id for item in embedded} == {embedded[0].embedding_id}
    assert all(item.status == FeedbackItem.Status.EMBEDDED for item in embedded)
    vector = np.frombuffer(embedded[0].embedding.vector, dtype=np.float32)
    assert vector.shape == (384,) and abs(np.linalg.norm(vector) - 1) < 1e-4
    assert embedded[0].embedding.model_name == embedder.model_label()

    # A later item with the same text reuses the stored vector.
    again = make_item(source, "again", comment="It edited the wrong file")
    pipeline.items_embed(item_ids=[again.id])
    again.refresh_from_db()
    assert again.embedding_id == embedded[0].embedding_id and Embedding.objects.count() == 2


@pytest.mark.django_db
def test_a_bare_thumbs_down_is_described_by_its_context():
    source, _ = source_make()
    item = make_item(
        source, "bare", context={"messages": [{"role": "user", "content": "Add a /health endpoint"}], "output": "Sure!"}
    )
    pipeline.items_embed(item_ids=[item.id])
    item.refresh_from_db()
    # The evidence, with the path masked: what went wrong, not where.
    assert item.embed_text == "Sure!"
    assert item.embed_recipe == EMBED_RECIPE
    assert item.embedding is not None


@pytest.mark.django_db
def test_an_item_without_any_text_is_kept_as_embedded_without_a_vector():
    source, _ = source_make()
    item = make_item(source, "empty")
    assert pipeline.items_embed(item_ids=[item.id]) == []
    item.refresh_from_db()
    assert item.status == FeedbackItem.Status.EMBEDDED
    assert item.embed_text == "" and item.embedding is None


@pytest.mark.django_db
def test_embedding_twice_changes_nothing():
    source, _ = source_make()
    item = make_item(source, "once", comment="slow")
    pipeline.items_embed(item_ids=[item.id])
    assert pipeline.items_embed(item_ids=[item.id]) == []
    assert Embedding.objects.count() == 1


@pytest.mark.django_db
def test_an_item_that_keeps_failing_ends_failed_with_its_error(monkeypatch, settings):
    source, _ = source_make()
    item = make_item(source, "poison", comment="text")

    def broken(texts, **kwargs):
        raise RuntimeError("model crashed")

    monkeypatch.setattr(embedder, "embed_texts", broken)
    for attempt in range(1, settings.PIPELINE_MAX_ATTEMPTS + 1):
        with pytest.raises(RuntimeError):
            pipeline.items_embed(item_ids=[item.id])
        pipeline.items_record_failure(item_ids=[item.id], error="RuntimeError: model crashed")
        item.refresh_from_db()
        assert item.attempts == attempt
    assert item.status == FeedbackItem.Status.FAILED
    assert item.last_error == "RuntimeError: model crashed"


@pytest.mark.django_db(transaction=True)
def test_an_ingested_event_is_embedded_and_assigned_to_its_category(client, eager):
    source, secret = source_make()
    seed_texts = ["The agent edited the wrong file", "It changed main.py instead of utils.py"]
    seeds = [make_item(source, f"seed{i}", comment=text) for i, text in enumerate(seed_texts)]
    pipeline.items_embed(item_ids=[item.id for item in seeds])
    vectors = [np.frombuffer(FeedbackItem.objects.get(id=s.id).embedding.vector, dtype=np.float32) for s in seeds]
    centroid = np.mean(vectors, axis=0)
    category = Category.objects.create(name="Wrong file", centroid=(centroid / np.linalg.norm(centroid)).tobytes())
    Category.objects.create(name="Unrelated", centroid=np.eye(384, dtype=np.float32)[0].tobytes())

    response = post_signed(client, source, secret, rating_event(id="evt_live", comment="It edited the wrong file again"))
    assert response.status_code == 202
    item = FeedbackItem.objects.get(external_id="evt_live")
    assert item.status == FeedbackItem.Status.ASSIGNED
    assignment = Assignment.objects.get(item=item)
    assert assignment.category == category and assignment.assigned_by == "model" and assignment.confidence > 0.55

    liked = rating_event(id="evt_up", rating="up", comment="It edited the wrong file, then fixed it. Great")
    post_signed(client, source, secret, liked)
    assert FeedbackItem.objects.get(external_id="evt_up").status == FeedbackItem.Status.EMBEDDED
    assert not Assignment.objects.filter(item__external_id="evt_up").exists()


@pytest.mark.django_db
def test_similar_items_come_back_nearest_first():
    source, _ = source_make()
    texts = [
        "It edited the wrong file",
        "The agent modified a different file than the one I asked about",
        "It claimed the tests passed but they failed",
        "Way too slow, took five minutes",
    ]
    items = [make_item(source, f"s{i}", comment=text) for i, text in enumerate(texts)]
    pipeline.items_embed(item_ids=[item.id for item in items])
    neighbours = selectors.similar_items(item_id=items[0].id, k=3)
    assert [n.item_id for n in neighbours][0] == items[1].id
    assert items[0].id not in [n.item_id for n in neighbours]
    assert neighbours[0].similarity >= neighbours[1].similarity >= neighbours[2].similarity
    by_text = selectors.similar_items(text="tests reported green but were red", k=1)
    assert by_text[0].item_id == items[2].id


@pytest.mark.django_db
def test_the_embedded_text_carries_no_secrets_or_personal_data():
    source, _ = source_make()
    item = make_item(
        source,
        "leaky",
        comment="It printed my key ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 and mailed dana@example.com",
    )
    pipeline.items_embed(item_ids=[item.id])
    item.refresh_from_db()
    assert "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789" not in item.embed_text
    assert "dana@example.com" not in item.embed_text
    assert "[SECRET:github_token]" in item.embed_text and "[EMAIL]" in item.embed_text
    assert item.comment.endswith("dana@example.com")  # the signal itself is kept as received
