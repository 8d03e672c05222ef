"""Clustering quality on the demo corpus (demo/corpus.py) against its failure themes.

Builds the demo signals in memory exactly as `demo_load` turns them into rows
(same schemas, same `rating_item_build` / `report_item_build`), derives each
item's text as the pipeline does (`feedback.text.embed_text`: evidence for
vague comments, scrubbing, masking), embeds the texts with the project's
embedder and clusters the items a cluster run clusters (reports and every
thumbs-down with some text) with `labeling.clustering.algorithm.cluster_vectors`,
without telling it the number of themes or areas. No database is touched.

    python bench/cluster_demo.py [--count 2400] [--seed 7] [--cluster-seed 0]
    CLUSTER_MIN_CLUSTER_SIZE=10 python bench/cluster_demo.py   # as a run with that setting

Truth. An item's label is the theme of the failure of its run. A thumbs-down
whose comment names no failure ("bad", "nope", or none) is embedded with its
run's evidence (tool error, end of output, request), so it carries its theme
too. Figures are given for all clustered items, for the items whose comment
names their theme, and for the areas against the themes. Unassigned items are
scored as in bench/cluster_quality.py (the lower of noise cluster and
singletons for NMI and ARI; wrong in ACC).

Noise: with another --cluster-seed (or corpus --seed) NMI moves by about
1-2 points and ARI by 1.5-3 on this corpus; compare a few seeds before
believing a small difference. `--show N` lists the N largest clusters with
their top themes, which shows how a theme is split.

The last line is always:
    demo: categories <n> NMI <x> ARI <x> ACC <x> unassigned <pct>% (themes <t>, items <m>)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Settings need a key and a data folder; no database is opened.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("SECRET_KEY", "bench")
os.environ.setdefault("DATA_DIR", str(Path(tempfile.gettempdir()) / "bench-cluster-demo"))

import django  # noqa: E402
import numpy as np  # noqa: E402

django.setup()

from bench.cluster_quality import score  # noqa: E402
from demo import corpus as demo_corpus  # noqa: E402
from demo.signals import rating_item, report_item  # noqa: E402
from feedback.embedder import embed_texts, model_label  # noqa: E402
from feedback.models import FeedbackItem, Source  # noqa: E402
from feedback.text import embed_text  # noqa: E402
from labeling.clustering.algorithm import cluster_vectors
from labeling.clustering.names import name_clusters
from labeling.clustering.runs import cluster_params

# What names a repository rather than a behaviour: no category name may hold one.
IDENTIFIER = re.compile(r"[\w-]+\.[a-z]{1,5}\b|\w+_\w+|[a-z]+[A-Z]\w*|/|\d")
# Any fixed day: only occurred_at depends on it, and nothing here reads that.
ANCHOR = datetime(2025, 1, 1, tzinfo=UTC)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2400, help="signals to generate (demo_load's default)")
    parser.add_argument("--seed", type=int, default=7, help="corpus seed (demo_load's default)")
    parser.add_argument("--cluster-seed", type=int, default=0, help="random_state for cluster_vectors")
    parser.add_argument("--show", type=int, default=0, help="print the N largest clusters with their themes")
    args = parser.parse_args()

    texts, truth, names, named = demo_items(count=args.count, seed=args.seed)
    vectors = embed(texts)
    params = cluster_params()  # the CLUSTER_* settings apply, as in a cluster run
    started = time.perf_counter()
    result = cluster_vectors(vectors, params=params, random_state=args.cluster_seed)
    print(f"clustered {len(texts)} items in {time.perf_counter() - started:.1f} s with {params}")
    areas = result.item_areas(vectors)
    figures = score(truth, areas)
    from sklearn.cluster import KMeans

    baseline = score(truth, KMeans(len(names), n_init=10, random_state=0).fit_predict(vectors))
    print(
        f"areas against the themes: NMI {figures['nmi']:.1f} ARI {figures['ari']:.1f} areas {result.n_areas} "
        f"(KMeans told k={len(names)} on the same vectors: NMI {baseline['nmi']:.1f} ARI {baseline['ari']:.1f})"
    )
    category_names = name_clusters(texts, result.labels)
    area_names = name_clusters(texts, areas)
    bad = [name for name in [*category_names.values(), *area_names.values()] if IDENTIFIER.search(name)]
    print(f"names holding a file name or identifier: {len(bad)} {bad[:5]}; areas: {'; '.join(area_names.values())}")
    report(result.labels, truth, names, named, n_clusters=result.n_clusters, show=args.show)


def demo_items(*, count: int, seed: int) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    """Texts of the items a cluster run clusters, their theme index, the theme names, and which name their theme."""
    signals = demo_corpus.generate(count=count, seed=seed, anchor=ANCHOR)
    product = Source(name=demo_corpus.PRODUCT_SOURCE_NAME, kind=Source.Kind.PRODUCT)
    form = Source(name="dogfooding form", kind=Source.Kind.DOGFOOD)
    receipt_id = uuid.uuid4()
    rows: list[tuple[str, str, bool]] = []
    for signal in signals:
        if signal.kind == "report":
            item = report_item(source=form, payload=signal.payload, receipt_id=receipt_id)
        else:
            item = rating_item(source=product, payload=signal.payload, receipt_id=receipt_id)
        # labeling.clustering.services.clusterable_failures: reports and every thumbs-down that has some text.
        if not (item.kind == FeedbackItem.Kind.REPORT or item.rating == -1):
            continue
        text = embed_text(item)  # the demo's sources add no custom patterns
        if text:
            rows.append((text, signal.theme, signal.comment_style == "theme"))
    names = sorted({label for _, label, _ in rows})
    index = {name: i for i, name in enumerate(names)}
    texts = [text for text, _, _ in rows]
    truth = np.array([index[label] for _, label, _ in rows])
    named = np.array([is_named for _, _, is_named in rows])
    return texts, truth, names, named


def embed(texts: list[str]) -> np.ndarray:
    started = time.perf_counter()
    # Equal texts share one vector, as in the pipeline.
    distinct = sorted(set(texts))
    row = {text: i for i, text in enumerate(distinct)}
    vectors = embed_texts(distinct)[[row[text] for text in texts]]
    mean_chars = np.mean([len(text) for text in texts])
    print(
        f"embedded {len(distinct)} distinct texts ({len(texts)} items, mean {mean_chars:.0f} chars)"
        f" with {model_label()} in {time.perf_counter() - started:.1f} s"
    )
    return vectors


def report(
    labels: np.ndarray, truth: np.ndarray, names: list[str], named: np.ndarray, *, n_clusters: int, show: int = 0
) -> dict[str, float]:
    """Print the figures; returns those over all items."""
    unassigned = 100 * float((labels < 0).mean())
    themes = score(_compact_truth(truth[named]), labels[named])
    print(
        f"items whose text names the theme ({int(named.sum())}): NMI {themes['nmi']:.1f} ARI {themes['ari']:.1f} "
        f"ACC {themes['acc']:.1f} unassigned {100 * float((labels[named] < 0).mean()):.1f}%"
    )
    if show:
        sizes = np.bincount(labels[labels >= 0], minlength=n_clusters)
        for cluster in np.argsort(-sizes, kind="stable")[:show]:
            counts = np.bincount(truth[labels == cluster], minlength=len(names))
            top = ", ".join(f"{names[i]} {counts[i]}" for i in np.argsort(-counts)[:3] if counts[i])
            print(f"  cluster {cluster:3d}: {sizes[cluster]:4d} items | {top}")
    figures = score(truth, labels)
    print(
        f"demo: categories {n_clusters} NMI {figures['nmi']:.1f} ARI {figures['ari']:.1f} ACC {figures['acc']:.1f} "
        f"unassigned {unassigned:.1f}% (themes {len(names)}, items {len(labels)})"
    )
    return figures


def _compact_truth(truth: np.ndarray) -> np.ndarray:
    return np.unique(truth, return_inverse=True)[1]


if __name__ == "__main__":
    main()
