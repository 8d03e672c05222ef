"""Clustering at scale: wall time and peak memory of cluster_vectors.

    python bench/cluster_scale.py [--n 100000] [--blobs 150] [--seed 0]

The data is synthetic, shaped like sentence embeddings: `--blobs` gaussian
categories on the unit sphere, 384-d, normalised. Like real embeddings the
vectors share a common direction, categories come in related groups (five
per topic, centroid cosine about 0.78 to the nearest sibling, as banking77's
intents), items sit at cosine about 0.8 to their category's centroid, sizes
are uneven, and 2% are scattered outliers.

Memory: tracemalloc misses what numpy's BLAS allocates, so the clustering
runs in a fresh child process that loads the vectors from a file and reports
its peak resident size (VmHWM: unlike getrusage's ru_maxrss it is not carried
over from the parent through fork and exec), as a whole and as the growth
during clustering.

Target: 100,000 vectors in under 30 s and 2 GB on a 2-core machine, areas and names included
(names from synthetic texts: words of each category's own vocabulary mixed with common words).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

DIMENSIONS = 384


def make_blobs(n: int, n_blobs: int, *, seed: int, dim: int = DIMENSIONS, outlier_share: float = 0.02):
    """Unit vectors (n, dim) float32 and their planted category (-1 = outlier)."""
    rng = np.random.default_rng(seed)

    def unit(a: np.ndarray) -> np.ndarray:
        return a / np.linalg.norm(a, axis=-1, keepdims=True)

    shared = unit(rng.normal(size=dim))  # real embeddings are far from centred
    n_topics = max(1, n_blobs // 5)
    topics = unit(0.7 * shared + unit(rng.normal(size=(n_topics, dim))))
    topic_of = rng.integers(0, n_topics, n_blobs)
    centers = unit(topics[topic_of] + 0.55 * unit(rng.normal(size=(n_blobs, dim))))
    shares = rng.dirichlet(np.full(n_blobs, 2.0))  # uneven category sizes
    n_outliers = int(n * outlier_share)
    truth = rng.choice(n_blobs, size=n - n_outliers, p=shares)
    spread = rng.uniform(0.6, 0.9, n_blobs)  # some categories are looser than others
    items = centers[truth] + spread[truth, None] * rng.normal(size=(len(truth), dim)) / np.sqrt(dim)
    outliers = unit(0.5 * shared + unit(rng.normal(size=(n_outliers, dim))))
    vectors = np.vstack([items, outliers])
    truth = np.concatenate([truth, np.full(n_outliers, -1)])
    order = rng.permutation(n)
    return unit(vectors[order]).astype(np.float32), truth[order]


def make_texts(truth: np.ndarray, *, seed: int) -> list[str]:
    """A short text per item for naming: words of its category's own vocabulary mixed with common ones."""
    rng = np.random.default_rng(seed + 1)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))

    def word() -> str:
        return "".join(rng.choice(letters, rng.integers(4, 9)))

    common = [word() for _ in range(200)]
    own = {c: [word() for _ in range(8)] for c in np.unique(truth).tolist()}
    texts = []
    for c in truth.tolist():
        words = [own[c][i] if rng.random() < 0.6 else common[i] for i in rng.integers(0, 8, 10)]
        texts.append(" ".join(words))
    return texts


def peak_rss_kib() -> int:
    """This process's peak resident set size in KiB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource

    # Elsewhere: ru_maxrss (KiB on Linux, bytes on macOS), which may include the parent's peak.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(path: str) -> None:
    """Load the vectors, cluster them, print figures as JSON (runs in its own process)."""
    import time

    import scipy.sparse  # noqa: F401  (imported before the baseline, so growth is the work itself)
    import sklearn.cluster  # noqa: F401

    from labeling.clustering.algorithm import cluster_vectors
    from labeling.clustering.names import name_clusters

    vectors = np.load(path)
    texts = Path(path.replace(".npy", ".txt")).read_text().split("\n")
    before = peak_rss_kib()
    started = time.perf_counter()
    result = cluster_vectors(vectors)
    clustered = time.perf_counter() - started
    areas = result.item_areas(vectors)
    name_clusters(texts, result.labels)
    name_clusters(texts, areas)
    seconds = time.perf_counter() - started
    peak = peak_rss_kib()
    np.save(path.replace(".npy", "-labels.npy"), result.labels)
    print(json.dumps({"seconds": seconds, "clustering_seconds": clustered, "peak_mb": peak / 1024,
                      "growth_mb": (peak - before) / 1024, "clusters": result.n_clusters, "areas": result.n_areas,
                      "unassigned": float((result.labels < 0).mean())}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="number of vectors")
    parser.add_argument("--blobs", type=int, default=150, help="planted categories")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return

    from sklearn.metrics import adjusted_rand_score

    vectors, truth = make_blobs(args.n, args.blobs, seed=args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "vectors.npy")
        np.save(path, vectors)
        Path(path.replace(".npy", ".txt")).write_text("\n".join(make_texts(truth, seed=args.seed)))
        del vectors
        out = subprocess.run([sys.executable, __file__, "--child", path], check=True, capture_output=True, text=True)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        labels = np.load(path.replace(".npy", "-labels.npy"))

    planted = truth >= 0
    print(f"{args.n} vectors, {args.blobs} planted categories, {int((~planted).sum())} planted outliers")
    print(
        f"ARI on planted items {100 * adjusted_rand_score(truth[planted], labels[planted]):.1f}; "
        f"planted outliers left unassigned {100 * (labels[~planted] < 0).mean():.0f}%"
    )
    print(
        f"time {figures['seconds']:.1f} s with areas and names (clustering {figures['clustering_seconds']:.1f} s) "
        f"peak memory {figures['peak_mb']:.0f} MB (+{figures['growth_mb']:.0f} MB while clustering) "
        f"clusters {figures['clusters']} areas {figures['areas']} unassigned {100 * figures['unassigned']:.1f}%"
    )


if __name__ == "__main__":
    main()
