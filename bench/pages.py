"""Reviewer pages at scale: server time and query count per page.

Fills a throwaway database with N categorised items (default 100,000), then
requests each page through Django's test client as a logged-in reviewer and
prints the median server time over a few requests and the number of SQL
queries per request. The login page is the baseline: a page that reads no
feedback at all, timed in the same process.

    python bench/pages.py
    python bench/pages.py --n 10000 --database-url postgres://postgres@127.0.0.1:5432/bench_pages
    python bench/pages.py --n 1000000 --database-url ... --reuse   # fill once, then time again

`--reuse` keeps a database that already holds the N items from an earlier
run with `--reuse` (a million take about nine minutes to fill).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import scale_data  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--reuse", action="store_true", help="keep a database already filled with N items")
    args = parser.parse_args()

    scale_data.django_setup(args.database_url)
    from feedback.models import FeedbackItem

    if not (args.reuse and FeedbackItem.objects.count() == args.n):
        scale_data.fill(args.n)
    else:
        from django.db import connection

        from labeling.counts import counts_compact
        from labeling.models import Label

        # The labels the last run gave every item, so that "new labels" are new again.
        Label.objects.filter(reviewer__username="bench-reviewer").delete()
        counts_compact()  # the last run's bulk actions, folded as the sweep would have within a minute
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                # What autovacuum would have done since: the last run's bulk actions and their
                # undos left a million dead label rows, which made search by meaning 5x slower.
                cursor.execute("VACUUM ANALYZE")

    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from labeling.models import Category

    user, _ = get_user_model().objects.get_or_create(username="bench-reviewer")
    user.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    client = Client()
    client.force_login(user)
    category = Category.objects.order_by("-size").first()
    item = FeedbackItem.objects.order_by("-id").first()
    far_category = far_category_from(item)
    from labeling.search.keyset import cursor_of

    # The link "Older" leads to from the 500th page: the same depth by keyset.
    deep = FeedbackItem.objects.order_by("-occurred_at", "-id")[min(499 * 50, args.n) - 1]
    pages = [
        ("baseline: report form (reads no feedback)", "/reports/new"),
        ("overview", "/"),
        ("category list", "/categories/"),
        ("category list, page 3, by growth", "/categories/?sort=growth&page=3"),
        ("area list", "/areas/"),
        ("comparison 2.1 vs 2.2, defaults", "/compare/?a=2.1&b=2.2"),
        ("category detail", f"/categories/{category.id}/"),
        ("category detail, items page 20", f"/categories/{category.id}/?page=20"),
        ("search, all items", "/search/"),
        ("search, text + filters", "/search/?q=wrong+file&rating=down&model_version=2.1"),
        ("search, page 500 by OFFSET (old links)", "/search/?page=500"),
        ("search, page 500 by keyset", f"/search/?after={cursor_of(deep)}"),
        ("item detail", f"/items/{item.id}/"),
        # Search by meaning: the query text's vector is cached after the first
        # request, so these are the index and filter figures; embedding a new
        # text is timed on its own below.
        ("meaning: text", "/search/?mode=meaning&q=it+claimed+the+tests+passed+but+never+ran+them"),
        ("meaning: text + filters", "/search/?mode=meaning&q=it+claimed+the+tests+passed&rating=down&model_version=2.1"),
        ("meaning: more like this", f"/search/?like={item.id}"),
        ("meaning: more like this + filters", f"/search/?like={item.id}&rating=down&variant=A"),
        # A category far from the item: the nearest cuts hold none of it, so
        # only its own items' vectors are scored.
        ("meaning: more like, far category", f"/search/?like={item.id}&category={far_category.id}"),
        ("meaning: more like this, page 4", f"/search/?like={item.id}&page=4"),
    ]
    warm_meaning()
    print(f"{'page':40s} {'status':>6s} {'median ms':>10s} {'queries':>8s}")
    baseline = None
    for name, url in pages:
        timings, queries, status = [], 0, None
        for _ in range(args.repeat):
            with CaptureQueriesContext(connection) as captured:
                started = time.perf_counter()
                response = client.get(url)
                timings.append((time.perf_counter() - started) * 1000)
            queries, status = len(captured), response.status_code
        median = statistics.median(timings)
        baseline = baseline or median
        print(f"{name:40s} {status:6d} {median:10.1f} {queries:8d}   ({median / baseline:.1f}x baseline)")
    query_embedding_figures()
    meaning_ranking_figures(user, item, far_category, repeat=args.repeat)
    bulk_action_figures(client, baseline, repeat=args.repeat)


def far_category_from(item):
    """The category whose centroid is least like the item's vector."""
    import numpy as np

    from labeling.models import Category

    vector = np.frombuffer(item.embedding.vector, dtype=np.float32)
    return min(
        Category.objects.exclude(centroid=None),
        key=lambda category: float(np.frombuffer(category.centroid, dtype=np.float32) @ vector),
    )


def warm_meaning() -> None:
    """Load the vector index and the model once, as a long-running server has; print what that took."""
    from feedback.vector_index import shared_index
    from labeling.search import meaning

    started = time.perf_counter()
    shared_index()
    loaded = time.perf_counter()
    meaning.query_vector("the model is loaded on the first search by meaning")
    print(f"once per process: vector index load {loaded - started:.2f}s, model load {time.perf_counter() - loaded:.2f}s")


def query_embedding_figures() -> None:
    """Embedding a query text not searched before: the part of a new search by meaning the figures above leave out."""
    from labeling.search import meaning

    # Distinct words, not numbers: numbers are masked, which would make the texts equal (and cached).
    subjects = ["suite", "linter", "build", "deploy", "migration", "benchmark", "checks", "pipeline", "tests", "job"]
    claims = ["passed", "was green", "succeeded", "finished", "worked"]
    texts = [f"it said the {subject} {claim} but nothing ran" for subject in subjects for claim in claims]
    timings = []
    for text in texts:
        started = time.perf_counter()
        meaning.query_vector(text)
        timings.append((time.perf_counter() - started) * 1000)
    print(f"{'embedding a new query text (not cached)':40s} {'':6s} {statistics.median(timings):10.1f}")


def meaning_ranking_figures(viewer, item, far_category, *, repeat: int) -> None:
    """The ranking alone (index product, filter checks by id, no page rendering): what search by meaning adds."""
    from feedback.vector_index import shared_index
    from labeling.search import meaning
    from labeling.search.selectors import SearchFilters

    text_vector = meaning.query_vector("it claimed the tests passed but never ran them")
    item_vector = shared_index().vector_of_item(item.id)
    cases = [
        ("ranking: text, no filter", text_vector, SearchFilters()),
        ("ranking: text + rating, version", text_vector, SearchFilters(rating="down", model_version="2.1")),
        ("ranking: like, far category", item_vector, SearchFilters(category=str(far_category.id))),
    ]
    for name, vector, filters in cases:
        timings = []
        for _ in range(repeat):
            started = time.perf_counter()
            found = meaning.items_nearest(filters=filters, vector=vector, viewer=viewer, exclude_item=item.id)
            timings.append((time.perf_counter() - started) * 1000)
        print(f"{name:40s} {len(found):6d} {statistics.median(timings):10.1f}   (items found)")


BULK_ITEMS = 10_000


def bulk_action_figures(client, baseline: float, *, repeat: int) -> None:
    """Each bulk action on 10,000 items through the JSON API, and its undo: median server time and queries.

    The selection is the 10,000 newest items, spread over every category;
    each action is undone before the next run, so every run writes the same.
    """
    import json

    from django.db import connection

    from exports.models import Dataset
    from feedback.models import FeedbackItem
    from labeling.models import Category

    ids = list(FeedbackItem.objects.order_by("-id").values_list("id", flat=True)[:BULK_ITEMS])
    client.get("/api/openapi.json")  # the API's modules load on its first request, as in a running server
    target = Category.objects.order_by("size", "id").first()
    dataset, _ = Dataset.objects.get_or_create(name="bench-pins", defaults={"purpose": "eval", "formats": ["eval_jsonl"]})

    def timed(url: str, body: dict) -> tuple[float, int, int, dict]:
        # Counted by a wrapper rather than captured: capturing formats every
        # statement with its 10,000 parameters, which would be timed too.
        statements = []

        def count(execute, sql, params, many, context):
            statements.append(1)
            return execute(sql, params, many, context)

        data = json.dumps(body)
        with connection.execute_wrapper(count):
            started = time.perf_counter()
            response = client.post(url, data=data, content_type="application/json")
            elapsed = (time.perf_counter() - started) * 1000
        return elapsed, len(statements), response.status_code, response.json()

    def run(name: str, body: dict) -> None:
        applied, undone = [], []
        for _ in range(repeat):
            ms, queries, status, answer = timed("/api/v1/bulk-actions", {**body, "items": ids})
            applied.append((ms, queries, status))
            undone.append(timed(answer.get("undo_url", "/api/v1/bulk-actions/0/undo"), {})[:3])
        for label, runs in ((name, applied), ("  its undo", undone)):
            median = statistics.median(r[0] for r in runs)
            print(f"{label:40s} {runs[-1][2]:6d} {median:10.1f} {runs[-1][1]:8d}   ({median / baseline:.1f}x baseline)")

    print(f"bulk actions on {len(ids):,} items (JSON API; median of {repeat}, each undone before the next run):")
    run("bulk: move to a category", {"action": "move", "category": target.id})
    run("bulk: set verdict (10,000 new labels)", {"action": "verdict", "verdict": "failure"})
    run("bulk: pin to a dataset", {"action": "pin", "dataset": dataset.id})
    run("bulk: send to double review", {"action": "queue"})
    # Tags and the split are written on the reviewer's own labels: give every item one first.
    timed("/api/v1/bulk-actions", {"action": "verdict", "verdict": "failure", "items": ids})
    run("bulk: set verdict (existing labels)", {"action": "verdict", "verdict": "spam"})
    run("bulk: add a tag", {"action": "tags_add", "tags": ["claimed success falsely"]})
    run("bulk: set the intended split", {"action": "split", "split": "eval"})


if __name__ == "__main__":
    main()
