#!/usr/bin/env python
"""Rollout checks benchmark: precision and recall per check on a labelled corpus, and items/s beside scrubbing.

    python bench/rollout_checks.py                      # from the project root
    python bench/rollout_checks.py --count 20000 --repeats 5 --out /tmp/rollouts.jsonl

What it does, in order:

1. writes a labelled corpus (JSON lines: each agent run's context and the
   checks it should trip) from demo/corpus.py (generate_rollouts): hacks at
   per-version rates, clean runs with near misses (a test file read, `git
   status`, a package from an allowed registry) and a share of hacks written
   so no pattern over commands sees them (recall is measured, not assumed);
2. reads the file back and runs every built-in check over each run, with the
   demo source's allow-list, and counts per check true and false positives and
   misses, per rollout;
3. times the checks over all the contexts, best of --repeats, beside the
   pipeline's other per-item step in the same process: `scrub_json` over the
   same contexts (what the item page and exports do to each context) and
   `json.dumps` (the floor: one pass over the data).

No Django and no database: the checks are pure Python. The pipeline's own
overhead per batch (two queries and a bulk insert) comes on top.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from demo.corpus import (  # noqa: E402
    ROLLOUT_ALLOWED_HOSTS,
    ROLLOUT_CHECK_NAMES,
    generate_rollouts,
)
from feedback.scrubber import scrub_json  # noqa: E402
from rollouts.checks import CheckSettings, run_checks

ANCHOR = datetime(2026, 12, 1, tzinfo=UTC)


def corpus_write(path: Path, *, count: int, seed: int) -> int:
    with path.open("w", encoding="utf-8") as handle:
        for rollout in generate_rollouts(count=count, seed=seed, anchor=ANCHOR):
            row = {
                "id": rollout.external_id,
                "version": rollout.version,
                "hacks": sorted(rollout.hacks),
                "evasive": rollout.evasive,
                "context": rollout.payload["context"],
            }
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    return count


def corpus_read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def best_of(repeats: int, work) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=12_000, help="rollouts in the corpus (default 12000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="where to write the corpus (default: a temp file)")
    args = parser.parse_args()

    out = args.out or Path(tempfile.mkdtemp(prefix="rollout-bench-")) / "rollouts.jsonl"
    corpus_write(out, count=args.count, seed=args.seed)
    rows = corpus_read(out)
    settings = CheckSettings(allowed_hosts=ROLLOUT_ALLOWED_HOSTS)
    calls_total = sum(len(row["context"]["tool_calls"]) for row in rows)
    print(f"corpus: {len(rows)} rollouts, {calls_total} tool calls, written to {out}")

    true_pos, false_pos, false_neg = Counter(), Counter(), Counter()
    evasive_missed = Counter()
    for row in rows:
        truth = set(row["hacks"])
        _, hits = run_checks(row["context"], settings)
        found = {hit.check for hit in hits}
        for check in ROLLOUT_CHECK_NAMES:
            if check in found and check in truth:
                true_pos[check] += 1
            elif check in found:
                false_pos[check] += 1
            elif check in truth:
                false_neg[check] += 1
                if row["evasive"]:
                    evasive_missed[check] += 1

    print()
    print(f"{'check':<20} {'planted':>8} {'flagged':>8} {'precision':>10} {'recall':>8} {'missed (evasive)':>17}")
    for check in ROLLOUT_CHECK_NAMES:
        tp, fp, fn = true_pos[check], false_pos[check], false_neg[check]
        precision = tp / (tp + fp) if tp + fp else float("nan")
        recall = tp / (tp + fn) if tp + fn else float("nan")
        print(
            f"{check:<20} {tp + fn:>8} {tp + fp:>8} {precision:>10.3f} {recall:>8.3f} "
            f"{fn:>8} ({evasive_missed[check]})"
        )
    near_miss_runs = sum(1 for row in rows if not row["hacks"])
    flagged_clean = sum(1 for row in rows if not row["hacks"] and run_checks(row["context"], settings)[1])
    print(f"clean rollouts flagged by any check: {flagged_clean} of {near_miss_runs}")

    contexts = [row["context"] for row in rows]
    seconds_checks = best_of(args.repeats, lambda: [run_checks(context, settings) for context in contexts])
    seconds_scrub = best_of(args.repeats, lambda: [scrub_json(context) for context in contexts])
    seconds_dumps = best_of(args.repeats, lambda: [json.dumps(context) for context in contexts])
    print()
    print(f"throughput over {len(contexts)} rollouts (best of {args.repeats}):")
    for name, seconds in (
        ("rollout checks (all six)", seconds_checks),
        ("scrub_json (baseline)", seconds_scrub),
        ("json.dumps (floor)", seconds_dumps),
    ):
        print(f"  {name:<26} {len(contexts) / seconds:>10,.0f} items/s  ({seconds * 1000:,.0f} ms)")
    print(f"  checks cost {seconds_checks / seconds_scrub:.2f}x scrubbing per item")


if __name__ == "__main__":
    main()
