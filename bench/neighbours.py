"""Nearest-neighbour lookups at scale: `feedback.selectors.similar_items`.

Fills a throwaway database (SQLite in a temporary folder, or the PostgreSQL
named by --database-url) with N items whose vectors are synthetic but
clustered like real feedback, then prints the time to load the index once and
the latency of k=10 lookups by item, against a brute-force numpy baseline run
in the same process on the same matrix.

    python bench/neighbours.py            # 100,000 items
    python bench/neighbours.py --n 20000
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench import scale_data  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--database-url", default="")
    args = parser.parse_args()

    scale_data.django_setup(args.database_url)
    from feedback import selectors
    from feedback.models import FeedbackItem
    from feedback.vector_index import shared_index

    vectors = scale_data.fill(args.n)
    rng = np.random.default_rng(1)

    started = time.perf_counter()
    shared_index()
    print(f"index load (first call, once per process): {time.perf_counter() - started:.2f}s")

    item_ids = list(FeedbackItem.objects.order_by("?").values_list("id", flat=True)[: args.queries])
    timings = []
    for item_id in item_ids:
        t0 = time.perf_counter()
        selectors.similar_items(item_id=item_id, k=10)
        timings.append((time.perf_counter() - t0) * 1000)

    # Baseline: the bare matrix product plus a full sort, no database.
    baseline = []
    for row in rng.integers(0, args.n, args.queries):
        t0 = time.perf_counter()
        np.argsort(-(vectors @ vectors[row]))[:11]
        baseline.append((time.perf_counter() - t0) * 1000)

    p = lambda values, q: float(np.percentile(values, q))  # noqa: E731
    print(f"similar_items k=10 over {args.n} items: p50 {p(timings, 50):.1f} ms  p99 {p(timings, 99):.1f} ms  "
          f"(includes the incremental refresh query)")
    print(f"baseline numpy matmul + argsort:      p50 {p(baseline, 50):.1f} ms  p99 {p(baseline, 99):.1f} ms")
    print(f"ratio p50 similar_items / baseline: {p(timings, 50) / p(baseline, 50):.2f}")


if __name__ == "__main__":
    main()
