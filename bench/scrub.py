#!/usr/bin/env python
"""Scrubber benchmark: texts/s, share of planted items caught, share of clean tokens hit.

    python bench/scrub.py                  # from the project root
    python bench/scrub.py --repeats 7 --long-kb 16

What it does, in order:

1. builds three sets from tests/scrub_corpus.py (made from a fixed seed, no
   downloads): short texts (at most 200 characters: comments, one-line
   reports, snippets), the whole corpus (planted + clean, up to a few hundred
   characters each), and long texts (corpus texts joined into tool-output-sized
   pieces of --long-kb KB);
2. times `scrub` over each set, best of --repeats runs, next to two baselines
   over the same texts in the same process: `str.lower` (the floor: one pass
   over the characters) and one precompiled e-mail regex `re.sub` (what a
   single-pattern scrubber costs);
3. times the short set again with two custom patterns, as a source adds
   them in the admin, then `scrub_json` over the JSON-shaped conversations;
4. counts the planted items caught (the planted string is gone and its
   placeholder is in its place) and the clean tokens that were changed.

Ingestion embeds about 1,400 short texts/s (design.md); the scrubber should
stay well clear of that (aim: 20,000 short texts/s or more).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from feedback.scrubber import scrub, scrub_json  # noqa: E402
from tests import scrub_corpus as corpus  # noqa: E402

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


def best_rate(fn, texts: list, repeats: int, min_seconds: float = 0.3) -> float:
    """Texts per second of the fastest run; a run repeats the set to last min_seconds."""
    rounds = 1
    started = time.perf_counter()
    fn(texts)
    once = time.perf_counter() - started
    if once < min_seconds:
        rounds = max(1, int(min_seconds / max(once, 1e-6)))
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(rounds):
            fn(texts)
        best = min(best, (time.perf_counter() - started) / rounds)
    return len(texts) / best


def run_scrub(texts):
    for text in texts:
        scrub(text)


# What a source might add in the admin (README, "Custom patterns").
CUSTOM = (("hostname", r"[a-z0-9-]+\.corp\.acme\.internal"), ("ticket", r"ACME-\d{5}"))


def run_scrub_custom(texts):
    for text in texts:
        scrub(text, extra_patterns=CUSTOM)


def run_lower(texts):
    for text in texts:
        text.lower()


def run_email_regex(texts):
    sub = EMAIL.sub
    for text in texts:
        sub("[EMAIL]", text)


def run_scrub_json(values):
    for value in values:
        scrub_json(value)


def long_texts(pool: list[str], size_kb: int, count: int) -> list[str]:
    rng = random.Random(7)
    texts = []
    for _ in range(count):
        parts, size = [], 0
        while size < size_kb * 1024:
            part = rng.choice(pool)
            parts.append(part)
            size += len(part) + 1
        texts.append("\n".join(parts))
    return texts


def caught_share() -> tuple[int, int, list[str]]:
    """Planted items whose string is gone and whose placeholder took its place."""
    caught, total, missed = 0, 0, []
    items = list(corpus.PLANTED) + list(corpus.ROW_EXAMPLES.values())
    for item in items:
        result = scrub(item.text).text
        for value, placeholder in item.planted:
            total += 1
            if value not in result and placeholder in result:
                caught += 1
            else:
                missed.append(value[:40])
    for value, planted in corpus.CONVERSATIONS:
        dumped = repr(scrub_json(value)[0])
        for secret, placeholder in planted:
            total += 1
            if secret not in dumped and placeholder in dumped:
                caught += 1
            else:
                missed.append(secret[:40])
    return caught, total, missed


def clean_share() -> tuple[int, int, list[str]]:
    changed, total = [], 0
    for text in corpus.CLEAN:
        before = text.split()
        total += len(before)
        after = scrub(text).text
        if after != text:
            kept = after.split()
            changed += [token for token in before if token not in kept]
    return len(changed), total, changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per figure; the best counts")
    parser.add_argument("--long-kb", type=int, default=8, help="size of each long text in KB")
    parser.add_argument("--long-count", type=int, default=60, help="number of long texts")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    everything = (
        [item.text for item in corpus.PLANTED] + [e.text for e in corpus.ROW_EXAMPLES.values()] + list(corpus.CLEAN)
    )
    sets = {
        "short": [t for t in everything if len(t) <= 200],
        "corpus": everything,
        "long": long_texts(everything, args.long_kb, args.long_count),
    }

    header = f"{'set':8} {'texts':>6} {'chars/text':>10} {'scrub/s':>10} {'lower/s':>11} {'1 regex/s':>10} {'MB/s':>6}"
    print(header + "  scrub vs 1 regex")
    rates = {}
    for name, texts in sets.items():
        mean_chars = sum(map(len, texts)) / len(texts)
        scrub_rate = rates[name] = best_rate(run_scrub, texts, args.repeats)
        lower_rate = best_rate(run_lower, texts, args.repeats)
        regex_rate = best_rate(run_email_regex, texts, args.repeats)
        print(
            f"{name:8} {len(texts):6d} {mean_chars:10.0f} {scrub_rate:10.0f} {lower_rate:11.0f} {regex_rate:10.0f}"
            f" {scrub_rate * mean_chars / 1e6:6.1f}  {regex_rate / scrub_rate:.1f}x slower"
        )

    custom_rate = best_rate(run_scrub_custom, sets["short"], args.repeats)
    print(
        f"short + {len(CUSTOM)} custom patterns {custom_rate:8.0f} texts/s"
        f" ({rates['short'] / custom_rate:.2f}x the time of built-in only)"
    )

    values = [value for value, _ in corpus.CONVERSATIONS]
    json_rate = best_rate(run_scrub_json, values, args.repeats)
    print(f"scrub_json {json_rate:8.0f} conversations/s ({len(values)} conversations with tool calls)")

    caught, total, missed = caught_share()
    print(
        f"caught      {caught}/{total} planted items = {100 * caught / total:.1f}%"
        + (f"  missed: {missed}" if missed else "")
    )
    wrong, tokens, changed = clean_share()
    print(
        f"false pos.  {wrong}/{tokens} clean tokens replaced = {100 * wrong / tokens:.2f}%"
        f" ({len(corpus.CLEAN)} clean texts)" + (f"  {changed}" if changed else "")
    )
    print(f"load avg    {load_before:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
