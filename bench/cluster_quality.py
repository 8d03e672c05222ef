"""Clustering quality on a labelled CSV (default: banking77 test.csv).

Embeds the `text` column with the project's embedder, clusters the vectors
with `labeling.clustering.cluster_vectors` WITHOUT telling it how many
categories there are, and compares with the `category` column.

    python bench/cluster_quality.py [--csv FILE] [--seed N] [--assignment]

Scoring. Unassigned items (label -1) count as wrong in ACC (Hungarian
one-to-one matching of clusters to categories). For NMI and ARI they are
scored both as one "noise" cluster and as singletons, and each figure is the
lower of the two (the noise cluster is the stricter on banking77).

`--assignment` also measures `assign_to_nearest`: clusters are fitted on
--fit-csv (default train.csv), each mapped to its majority category, and the
--csv items are assigned to the nearest centroid; it prints the share
assigned and the precision per similarity threshold.

The last line is always:
    NMI <x> ARI <x> ACC <x> clusters <n> unassigned <pct>%
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy.optimize import linear_sum_assignment  # noqa: E402
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score  # noqa: E402

from feedback.embedder import embed_texts, model_label  # noqa: E402
from labeling.clustering import ASSIGN_THRESHOLD, ClusterParams, assign_to_nearest, cluster_vectors  # noqa: E402

BANKING77 = ROOT.parent / "shared" / "benchmarks" / "banking77"
THRESHOLDS = (0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", type=Path, default=BANKING77 / "test.csv", help="CSV with text,category columns")
    parser.add_argument("--seed", type=int, default=0, help="random_state for cluster_vectors")
    parser.add_argument("--assignment", action="store_true", help="also measure assign_to_nearest thresholds")
    parser.add_argument("--fit-csv", type=Path, default=BANKING77 / "train.csv", help="clusters for --assignment")
    args = parser.parse_args()

    texts, truth = read_csv(args.csv)
    vectors = embed(texts, args.csv)
    params = ClusterParams()
    started = time.perf_counter()
    result = cluster_vectors(vectors, params=params, random_state=args.seed)
    seconds = time.perf_counter() - started
    print(f"clustered {len(texts)} items in {seconds:.1f} s with {params}")

    if args.assignment:
        measure_assignment(args.fit_csv, vectors, truth, params, args.seed)

    scores = score(truth, result.labels)
    print(
        f"true categories {len(set(truth.tolist()))}; "
        f"NMI noise-cluster {scores['nmi_noise']:.1f} / singletons {scores['nmi_singletons']:.1f}, "
        f"ARI noise-cluster {scores['ari_noise']:.1f} / singletons {scores['ari_singletons']:.1f}"
    )
    unassigned = 100 * float((result.labels < 0).mean())
    print(
        f"NMI {scores['nmi']:.1f} ARI {scores['ari']:.1f} ACC {scores['acc']:.1f} "
        f"clusters {result.n_clusters} unassigned {unassigned:.1f}%"
    )


def read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    names = sorted({row["category"] for row in rows})
    index = {name: i for i, name in enumerate(names)}
    return [row["text"] for row in rows], np.array([index[row["category"]] for row in rows])


def embed(texts: list[str], path: Path) -> np.ndarray:
    started = time.perf_counter()
    vectors = embed_texts(texts)
    print(f"embedded {len(texts)} texts of {path.name} with {model_label()} in {time.perf_counter() - started:.1f} s")
    return vectors


def score(truth: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Percent figures; unassigned items count as wrong."""
    unassigned = labels < 0
    top = int(labels.max()) + 1 if len(labels) else 0
    as_noise = np.where(unassigned, top, labels)
    as_singletons = labels.copy()
    as_singletons[unassigned] = top + np.arange(int(unassigned.sum()))
    figures = {
        "nmi_noise": 100 * normalized_mutual_info_score(truth, as_noise),
        "nmi_singletons": 100 * normalized_mutual_info_score(truth, as_singletons),
        "ari_noise": 100 * adjusted_rand_score(truth, as_noise),
        "ari_singletons": 100 * adjusted_rand_score(truth, as_singletons),
    }
    figures["nmi"] = min(figures["nmi_noise"], figures["nmi_singletons"])
    figures["ari"] = min(figures["ari_noise"], figures["ari_singletons"])
    # Hungarian matching of clusters to categories on the assigned items only,
    # divided by all items: an unassigned item is never right.
    overlap = np.zeros((max(top, 1), int(truth.max()) + 1))
    np.add.at(overlap, (labels[~unassigned], truth[~unassigned]), 1)
    rows, cols = linear_sum_assignment(overlap, maximize=True)
    figures["acc"] = 100 * overlap[rows, cols].sum() / len(truth)
    return figures


def measure_assignment(fit_csv: Path, vectors: np.ndarray, truth: np.ndarray, params: ClusterParams, seed: int) -> None:
    """Share assigned and precision of assign_to_nearest per threshold."""
    fit_texts, fit_truth = read_csv(fit_csv)
    fitted = cluster_vectors(embed(fit_texts, fit_csv), params=params, random_state=seed)
    # Each fitted cluster stands for the category most of its items have.
    majority = np.array([np.bincount(fit_truth[fitted.labels == c]).argmax() for c in range(fitted.n_clusters)])
    # Category names come from sorted category sets; both files hold all 77.
    nearest, similarity = assign_to_nearest(vectors, fitted.centroids, threshold=-1.0)
    right = majority[nearest] == truth
    print(f"assignment: {fitted.n_clusters} clusters fitted on {fit_csv.name}; default threshold {ASSIGN_THRESHOLD}")
    print("  threshold  assigned  precision  | next band: share, precision")
    print(f"  {'none':>9}  {100.0:7.1f}%  {100 * right.mean():8.1f}%")
    for low, high in zip(THRESHOLDS, [*THRESHOLDS[1:], 1.01]):
        kept = similarity >= low
        band = kept & (similarity < high)
        band_precision = 100 * right[band].mean() if band.any() else float("nan")
        print(
            f"  {low:9.2f}  {100 * kept.mean():7.1f}%  {100 * right[kept].mean():8.1f}%"
            f"  | [{low:.2f}, {min(high, 1.0):.2f}): {100 * band.mean():4.1f}%, {band_precision:.0f}%"
        )


if __name__ == "__main__":
    main()
