"""Factories for the cluster-run tests: embedded items around a few themes, and a run done in process."""

import uuid

import numpy as np
from django.utils import timezone

from feedback.models import Embedding, FeedbackItem
from labeling.clustering.runs import cluster_run_execute, cluster_run_start
from labeling.models import Assignment, Category, ClusterRun

THEMES = {
    0: "edited the wrong file",
    1: "claimed the tests passed",
    2: "asked needless questions",
    3: "hallucinated an api",
}


def blob_vectors(rng, center, n, spread=0.01):
    vectors = center + spread * rng.standard_normal((n, center.size))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def add_items(source, centers, per_theme, *, seed, themes=THEMES, rating=-1):
    """Embedded thumbs-down items around each theme's centre; returns {theme: [item ids]}."""
    rng = np.random.default_rng(seed)
    made = {}
    for theme in themes:
        vectors = blob_vectors(rng, centers[theme], per_theme)
        ids = []
        for i, vector in enumerate(vectors):
            text = f"{THEMES[theme]} {seed}-{i}"
            embedding = Embedding.objects.create(content_hash=uuid.uuid4().hex, model_name="test", vector=vector.tobytes())
            item = FeedbackItem.objects.create(
                source=source, external_id=f"{seed}-{theme}-{i}", kind="rating", rating=rating, comment=text,
                embed_text=text, occurred_at=timezone.now(), receipt_id=uuid.uuid4(), embedding=embedding,
                status=FeedbackItem.Status.EMBEDDED,
            )
            ids.append(item.id)
        made[theme] = ids
    return made


def run_clustering() -> ClusterRun:
    run = cluster_run_start(trigger=ClusterRun.Trigger.COMMAND, enqueue=False)
    cluster_run_execute(run_id=run.id)
    run.refresh_from_db()
    assert run.status == ClusterRun.Status.DONE, run.error
    return run


def category_of(item_id) -> Category | None:
    assignment = Assignment.objects.filter(item_id=item_id).select_related("category").first()
    return assignment.category if assignment else None
