"""A throwaway database filled with many embedded, categorised items, for the benchmarks."""

import os
import tempfile
import time
import uuid
from datetime import timedelta

import numpy as np


def django_setup(database_url: str = "") -> str:
    """Point Django at a fresh database (SQLite in a temporary folder by default) and migrate it."""
    workdir = tempfile.mkdtemp(prefix="bench-")
    # Plain http through the test client, and static files from the source folders (no collectstatic).
    os.environ.update(DATA_DIR=workdir, SECRET_KEY="bench", DJANGO_SETTINGS_MODULE="config.settings",
                      PLAIN_HTTP="1", STATIC_COLLECTED="0")
    os.environ["DATABASE_URL"] = database_url or f"sqlite:///{workdir}/bench.sqlite3"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return workdir


def fill(n: int, *, categories: int = 150, seed: int = 0) -> np.ndarray:
    """n thumbs-down items with clustered unit vectors, a category each; returns the vectors."""
    from django.utils import timezone

    from feedback import services
    from feedback.models import Embedding, FeedbackItem
    from labeling.models import Assignment, Category

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((categories, 384)).astype(np.float32)
    theme = rng.integers(0, categories, n)
    vectors = centres[theme] + 0.08 * rng.standard_normal((n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    started = time.perf_counter()
    source, _ = services.source_create(name="bench")
    category_rows = Category.objects.bulk_create(
        Category(name=f"Failure theme {c}", keywords=[f"word{c}"], centroid=(centres[c] / np.linalg.norm(centres[c])).tobytes())
        for c in range(categories)
    )
    if category_rows[0].id is None:
        category_rows = list(Category.objects.order_by("id"))
    now = timezone.now()
    words = ["wrong file", "tests failed", "too slow", "asked again", "made up an API", "looped", "deleted code"]
    for start in range(0, n, 5000):
        chunk = range(start, min(start + 5000, n))
        embeddings = Embedding.objects.bulk_create(
            Embedding(content_hash=f"{i:064x}", model_name="bench", vector=vectors[i].tobytes()) for i in chunk
        )
        if embeddings[0].id is None:  # backends that do not return ids
            embeddings = list(Embedding.objects.filter(content_hash__in=[f"{i:064x}" for i in chunk]).order_by("id"))
        items = FeedbackItem.objects.bulk_create(
            FeedbackItem(
                source=source, external_id=str(i), kind="rating", rating=-1 if i % 3 else 1,
                comment=f"Signal {i}: it {words[i % len(words)]} in module_{i % 97}.py",
                model_version=f"2.{i % 3}", variant="AB"[i % 2], occurred_at=now - timedelta(minutes=i),
                receipt_id=uuid.uuid4(), embedding=e, status="assigned",
            )
            for i, e in zip(chunk, embeddings)
        )
        if items[0].id is None:
            items = list(FeedbackItem.objects.filter(external_id__in=[str(i) for i in chunk]).order_by("id"))
        Assignment.objects.bulk_create(
            Assignment(item=item, category=category_rows[theme[i]], confidence=0.8) for i, item in zip(chunk, items)
        )
    from labeling.clustering.services import categories_refresh_sizes

    categories_refresh_sizes()
    from labeling.counts import counts_compact

    counts_compact()  # what the sweep does within a minute: the pages read folded counts
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            # What autovacuum does within minutes of a bulk load: without statistics the planner
            # took a million-row version for 300 rows and a filtered search page for 1.5 s.
            cursor.execute("ANALYZE")
    print(f"filled {n} items in {categories} categories in {time.perf_counter() - started:.1f}s")
    return vectors
