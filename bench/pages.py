"""Reviewer pages at scale: server time and query count per page.

Fills a throwaway database with N categorised items (default 100,000), then
requests each page through Django's test client as a logged-in reviewer and
prints the median server time over a few requests and the number of SQL
queries per request. The login page is the baseline: a page that reads no
feedback at all, timed in the same process.

    python bench/pages.py
    python bench/pages.py --n 10000 --database-url postgres://postgres@127.0.0.1:5432/bench_pages
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
    args = parser.parse_args()

    scale_data.django_setup(args.database_url)
    scale_data.fill(args.n)

    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from feedback.models import FeedbackItem
    from labeling.models import Category

    user = get_user_model().objects.create_user("bench-reviewer", password="x")
    user.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    client = Client()
    client.force_login(user)
    category = Category.objects.order_by("-size").first()
    item = FeedbackItem.objects.order_by("-id").first()
    pages = [
        ("baseline: report form (reads no feedback)", "/reports/new"),
        ("overview", "/"),
        ("category list", "/categories/"),
        ("category list, page 3, by growth", "/categories/?sort=growth&page=3"),
        ("category detail", f"/categories/{category.id}/"),
        ("category detail, items page 20", f"/categories/{category.id}/?page=20"),
        ("search, all items", "/search/"),
        ("search, text + filters", "/search/?q=wrong+file&rating=down&model_version=2.1"),
        ("search, page 500", "/search/?page=500"),
        ("item detail", f"/items/{item.id}/"),
    ]
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


if __name__ == "__main__":
    main()
