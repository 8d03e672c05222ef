"""Clustering quality on a labelled CSV (default: banking77 test.csv).

Runs the project's own path on the `text` column: the text recipe
(`feedback.text.embed_text`: scrubbing, then masking of paths, identifiers,
hashes, URLs and numbers), the project's embedder, `cluster_vectors` WITHOUT
being told how many categories or areas there are, and the naming of
categories and areas. Compares with the `category` column (and with `area`
when the CSV has one), next to KMeans told the true k on the same vectors in
the same run.

    python bench/cluster_quality.py [--csv FILE] [--assignments OUT.csv] [--vectors OUT.npy]
                                    [--seed N] [--assignment]

`--assignments` writes one row per input row, in input order:
`text,cluster,cluster_name,area,area_name` (`cluster` -1 for unsorted;
`area` the area's index, which an unsorted row also has: its nearest area).
`--vectors` writes the float32 vectors that were clustered (`numpy.save`).

Scoring. Unassigned items (label -1) count as wrong in ACC (Hungarian
one-to-one matching of clusters to categories). For NMI and ARI they are
scored both as one "noise" cluster and as singletons, and each figure is the
lower of the two. "named" is the share of categories whose name shares a
word (first five letters) with the name of the category most of its items
have, for CSVs whose category names are words.

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
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy.optimize import linear_sum_assignment  # noqa: E402
from sklearn.cluster import KMeans  # noqa: E402
from sklearn.metrics import (  # noqa: E402
    adjusted_rand_score,
    normalized_mutual_info_score,
)

from feedback.embedder import embed_texts, model_label  # noqa: E402
from feedback.text import embed_text  # noqa: E402
from labeling.clustering.algorithm import (
    ASSIGN_THRESHOLD,
    ClusterParams,
    assign_to_nearest,
    cluster_vectors,
)
from labeling.clustering.names import name_clusters

BANKING77 = ROOT.parent / "shared" / "benchmarks" / "banking77"
THRESHOLDS = (0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", type=Path, default=BANKING77 / "test.csv", help="CSV with text,category[,area] columns")
    parser.add_argument("--assignments", type=Path, help="write text,cluster,cluster_name,area,area_name per row")
    parser.add_argument("--vectors", type=Path, help="write the clustered float32 vectors (numpy.save)")
    parser.add_argument("--seed", type=int, default=0, help="random_state for cluster_vectors and KMeans")
    parser.add_argument("--assignment", action="store_true", help="also measure assign_to_nearest thresholds")
    parser.add_argument("--fit-csv", type=Path, default=BANKING77 / "train.csv", help="clusters for --assignment")
    args = parser.parse_args()

    rows = read_rows(args.csv)
    raw_texts = [row["text"] for row in rows]
    truth, category_names = labels_of(rows, "category")
    texts = recipe_texts(raw_texts)
    vectors = embed(texts, args.csv)
    params = ClusterParams()
    started = time.perf_counter()
    result = cluster_vectors(vectors, params=params, random_state=args.seed)
    areas = result.item_areas(vectors)
    names = name_clusters(texts, result.labels)
    area_names = name_clusters(texts, areas)
    seconds = time.perf_counter() - started
    print(f"clustered {len(texts)} items in {seconds:.1f} s (areas and names included) with {params}")
    if args.vectors:
        np.save(args.vectors, vectors.astype(np.float32))
    if args.assignments:
        write_assignments(args.assignments, raw_texts, result.labels, names, areas, area_names)

    if args.assignment:
        measure_assignment(args.fit_csv, vectors, truth, params, args.seed)

    k = len(category_names)
    kmeans = KMeans(k, n_init=10, random_state=args.seed).fit_predict(vectors)
    baseline = score(truth, kmeans)
    print(f"KMeans told k={k}: NMI {baseline['nmi']:.1f} ARI {baseline['ari']:.1f} ACC {baseline['acc']:.1f}")
    if "area" in rows[0]:
        area_truth, area_labels = labels_of(rows, "area")
        ours = score(area_truth, areas)
        theirs = score(area_truth, KMeans(len(area_labels), n_init=10, random_state=args.seed).fit_predict(vectors))
        print(
            f"areas: NMI {ours['nmi']:.1f} ARI {ours['ari']:.1f} areas {result.n_areas} "
            f"(true {len(area_labels)}; KMeans told k={len(area_labels)}: NMI {theirs['nmi']:.1f} ARI {theirs['ari']:.1f})"
        )
    print(f"named: {100 * named_share(result.labels, truth, category_names, names):.0f}% of categories; "
          f"e.g. {'; '.join(list(names.values())[:6])}")
    scores = score(truth, result.labels)
    print(
        f"true categories {k}; "
        f"NMI noise-cluster {scores['nmi_noise']:.1f} / singletons {scores['nmi_singletons']:.1f}, "
        f"ARI noise-cluster {scores['ari_noise']:.1f} / singletons {scores['ari_singletons']:.1f}"
    )
    unassigned = 100 * float((result.labels < 0).mean())
    print(
        f"NMI {scores['nmi']:.1f} ARI {scores['ari']:.1f} ACC {scores['acc']:.1f} "
        f"clusters {result.n_clusters} unassigned {unassigned:.1f}%"
    )


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def labels_of(rows: list[dict[str, str]], column: str) -> tuple[np.ndarray, list[str]]:
    names = sorted({row[column] for row in rows})
    index = {name: i for i, name in enumerate(names)}
    return np.array([index[row[column]] for row in rows]), names


def read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    rows = read_rows(path)
    return recipe_texts([row["text"] for row in rows]), labels_of(rows, "category")[0]


def recipe_texts(texts: list[str]) -> list[str]:
    """Each text as the pipeline embeds a report that says it (scrubbed, masked)."""
    return [embed_text(SimpleNamespace(title="", comment=text, expected="", context={})) for text in texts]


def embed(texts: list[str], path: Path) -> np.ndarray:
    started = time.perf_counter()
    # Equal texts share one vector, as in the pipeline.
    distinct = sorted(set(texts))
    row = {text: i for i, text in enumerate(distinct)}
    vectors = embed_texts(distinct)[[row[text] for text in texts]]
    print(f"embedded {len(texts)} texts of {path.name} with {model_label()} in {time.perf_counter() - started:.1f} s")
    return vectors


def write_assignments(path: Path, texts, labels, names, areas, area_names) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "cluster", "cluster_name", "area", "area_name"])
        for text, label, area in zip(texts, labels.tolist(), areas.tolist()):
            writer.writerow([text, label, names.get(label, "unsorted") if label >= 0 else "unsorted", area,
                             area_names.get(area, "")])


def named_share(labels: np.ndarray, truth: np.ndarray, category_names: list[str], names: dict[int, str]) -> float:
    """Share of clusters whose name shares a word (its first five letters) with its majority category's name."""
    def stems(text: str) -> set[str]:
        return {word[:5] for word in re.findall(r"[a-z]+", text.lower()) if len(word) > 2}

    hits = 0
    for cluster, name in names.items():
        majority = category_names[int(np.bincount(truth[labels == cluster]).argmax())]
        hits += bool(stems(name) & stems(majority.replace("_", " ")))
    return hits / max(len(names), 1)


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
