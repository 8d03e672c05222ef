"""Clustering of feedback vectors into failure categories.

Pure numpy / scikit-learn / scipy, no Django: the cluster-run service calls
it, and the benchmarks in bench/ call it on their own.

How `cluster_vectors` works, and why:

1. Over-cluster. k-means splits the items into many small micro-clusters
   (about `items_per_micro_cluster` items each, between `min_micro_clusters`
   and `max_micro_clusters`; on small data every item is its own). This is
   the only step that touches every item, so it is what makes 100,000 items
   feasible: plain Ward on the items is O(n^2) in memory and time.
2. Merge. Ward agglomeration of the micro-clusters, weighted by their sizes:
   Ward's merge cost depends only on the groups' sizes and means, so this is
   exactly Ward on the items, started from the micro-clusters. Merging stops
   at a distance threshold, which is how the number of categories is chosen
   without being told k.
3. Refine. A few spherical k-means steps from the merged centroids move the
   items that the micro-clusters put on the wrong side of a boundary.
4. Leave out what fits nowhere. Clusters smaller than `min_cluster_size` are
   dissolved, and any item whose cosine similarity to its centroid is below
   `min_similarity` is left unassigned (label -1) rather than forced into a
   category.

The merge threshold is scale-independent: Ward's distance between two groups
is sqrt(2 * n_a * n_b / (n_a + n_b)) * |mean_a - mean_b|, so it grows with
the square root of the group sizes, and a fixed threshold would find ever more
categories as items accumulate. We divide it by sqrt(n), i.e. a merge is
refused when it would raise the mean squared distance of *all* items to their
centroids by more than threshold^2 / 2. Sampling the same kind of feedback at
3,000 or 100,000 items then gives about the same categories.

Below `merge_min_items` the threshold stops shrinking: two micro-clusters of
one category differ by sampling noise, and that Ward cost does not shrink with
n. A known limit of the criterion: a category that is a very small share of
the data (well under 1%) and close to a neighbour merges into it.

Defaults were tuned on banking77 train.csv (10,003 texts, 77 intents) and
checked on test.csv and on synthetic data up to 100,000 items
(bench/cluster_quality.py, bench/cluster_scale.py). merge_threshold 0.045 had
the best ARI on train (0.04: more clusters, same ARI, lower ACC; 0.05: fewer
clusters, lower NMI and ARI); it finds 90-97 clusters for the 77 intents,
erring towards splitting, which a reviewer undoes with one merge. Two refine
passes added 0.4 (train) to 2 (test) ARI points. min_similarity 0.5 unassigns
about 1% of banking77: items that share their cluster's majority intent 40%
of the time, against 64% for the rest. Higher values cost more than they
give: at 0.6, 3% are unassigned and the precision of the rest rises by under
a point, while NMI and ARI (which count unassigned items against us) drop."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from labeling.clustering.areas import areas_of_clusters
from labeling.clustering.splits import split_reality
from labeling.clustering.vectors import (
    centroids_of,
    compact_labels,
    label_sums,
    nearest_centroid,
    unit_rows,
)
from labeling.clustering.ward import (
    modularity,
    most_modular_cut,
    ward_tree,
)

DIMENSIONS = 384

# Default cosine similarity an item needs to its nearest category centroid to
# be sorted into it between cluster runs (`assign_to_nearest`). Measured on
# banking77 (clusters fitted on train.csv, each mapped to its majority intent;
# test.csv items assigned to the nearest centroid): items below 0.65 land in
# the right category only 28-38% of the time, items in 0.65-0.75 about half
# the time, above 0.75 over 60%. At 0.65 about 92% of items are assigned, at
# 70% precision (68% when all are). Run `bench/cluster_quality.py --assignment`.
ASSIGN_THRESHOLD = 0.65

# Below this many items k-means runs as exact Lloyd iterations in well under
# a few seconds; above it, mini-batches keep 100,000 items to seconds.
_EXACT_KMEANS_MAX_ITEMS = 20_000


@dataclass(frozen=True)
class ClusterParams:
    """Tunable settings of `cluster_vectors` (stored with each cluster run)."""

    # Fewer failure signals than this are not worth clustering yet.
    min_items: int = 20
    # Granularity of the over-clustering step: small enough that a
    # micro-cluster rarely straddles two categories, big enough that the
    # merge step stays cheap.
    items_per_micro_cluster: int = 10
    # Small data gets at least this many micro-clusters (every item its own,
    # i.e. exact Ward, up to this many items), so that k is not capped at n/10.
    min_micro_clusters: int = 200
    max_micro_clusters: int = 2000
    # Ward merge threshold per square root of the number of items (see the
    # module docstring); larger merges more, so fewer categories.
    merge_threshold: float = 0.045
    # The threshold stops shrinking below this many items: two micro-clusters
    # of one category differ by sampling noise, whose Ward cost does not
    # shrink with n, so on small data nothing would merge. At 2000 corpora of
    # 600-1,800 items came out too coarse: over 16 corpora and samples, three
    # seeds each (bench/cluster_quality.py), 1000 raised mean leaf NMI / ARI
    # against KMeans told k by 0.7 / 1.1 points, with HWU64 (1,076 items, 64
    # intents: ARI 47.0-53.0 -> 50.0-51.8, KMeans 50.9-51.3), 1,000 banking77
    # texts and 1,200 StackOverflow titles gaining; only the demo corpus
    # lost (its categories' ARI against the 15 themes 23.0 -> 21.1).
    merge_min_items: int = 1000
    # Spherical k-means passes after merging.
    refine_iterations: int = 2
    # Then each item takes the category most of its nearest neighbours have
    # (weighted by cosine), this many rounds over this many neighbours: k-means
    # boundaries are straight, the neighbourhood follows the data. On
    # banking77 test it added 1.9 NMI and 2.8 ARI points, and 1-6 ARI points
    # on every other corpus tried; more neighbours merge broad corpora's
    # pieces further but join distinct narrow intents.
    smooth_neighbours: int = 10
    smooth_rounds: int = 3
    # Clusters smaller than this are dissolved; their items go to the nearest
    # remaining cluster if they are similar enough, else stay unassigned.
    min_cluster_size: int = 5
    # Items less cosine-similar than this to their centroid are unassigned...
    min_similarity: float = 0.5
    # ...but never more than this share of all items: on long or noisy texts
    # every cosine is lower, and an absolute floor alone left 40% unsorted.
    max_unassigned_share: float = 0.01
    # ...except that an item this far from its centroid is never assigned:
    # a random direction in 384 dimensions has a cosine of 0 +- 0.05. At 0.25
    # this floor left 7-10% of short, diverse texts unsorted (StackOverflow
    # titles, AG News); at 0.15 they are left to the cap.
    min_similarity_floor: float = 0.15
    # The threshold finds 60-100 categories on any corpus, which splits a few
    # broad, well-separated classes into many pieces. So the Ward tree is also
    # cut where the item neighbour graph is most modular, and a coarser cut is
    # taken when the most modular one beats the threshold cut's modularity by
    # more than this. Measured over seeds: 0.22 on ten broad paragraph topics,
    # 0.12 on 20 StackOverflow tags, 0.05-0.09 on the demo corpus and 0.057-
    # 0.063 on 89 tweet topics of very unequal sizes (coarser is right: ARI
    # 84 against 61 there); 0.026-0.045 on banking77 over eight seeds and
    # 0.02-0.036 on CLINC150 (the threshold is right). 1 turns it off.
    coarse_modularity_gain: float = 0.05
    # The coarser cut is the finest whose modularity is within this of the
    # most modular one (see most_modular_cut): on 20 StackOverflow tags the
    # argmax gave ARI 42.5-54.3 over three seeds, this 53.7-55.0.
    coarse_cut_tolerance: float = 0.005
    # ...but not when the pieces the coarser cut would join are real: when each
    # broad group's last split separates held-out items this many times better
    # than a 2-means split of a Gaussian blob of the same shape does
    # (labeling.clustering.splits). HWU64's 64 narrow intents in 18 domains
    # clear the bar at 1.40-1.53 (coarse cut: leaf NMI / ARI 70 / 30; fine cut:
    # 80 / 50-52, KMeans told k 79.6-79.8 / 50.9-51.3); 20 StackOverflow tags, each
    # chopped into slices, score 1.04-1.16 and keep the broad cut.
    real_split_ratio: float = 1.3
    # Areas: categories grouped by modularity of the neighbour graph at this
    # resolution (below 1 gives fewer, larger areas), between these counts.
    # On the demo corpus (agent failures; 2.2 asks needless questions more and
    # writes walls of text less) 0.5 joined both themes in one area on 3 of 9
    # runs, and the regression hid in it. Against known areas, three seeds
    # each (NMI; KMeans told the number of areas in brackets), 1.0 against
    # 0.75: HWU64's 18 scenarios 69.0-70.9 against 67.5-69.0 (67.3-69.4), with
    # 15-18 areas instead of 12-13; the demo's 15 themes 54.5-59.7 against
    # 53.0-58.3 (49.0-52.9), 15-17 areas instead of 12-14; CLINC150's 10
    # domains 54.3-55.9 against 52.1-53.8 (48.4-50.3); TREC's 6 question
    # types 34.9-36.1 against 35.0-36.6 (42.1-45.4). At 1.0 banking77's areas
    # against its 8 domains lost 3-8 ARI points; NMI is what is compared.
    area_resolution: float = 1.0
    min_areas: int = 3
    max_areas: int = 25


@dataclass(frozen=True)
class ClusterResult:
    labels: np.ndarray  # (n,) int64, cluster index or -1 for unassigned
    centroids: np.ndarray  # (k, d) float32, L2-normalised mean of each cluster's items
    sizes: np.ndarray  # (k,) int64, items per cluster
    similarity: np.ndarray  # (n,) float32, cosine to own centroid (to the nearest one if unassigned)
    # (k,) int64: the area index of each cluster; areas group clusters.
    area_of_cluster: np.ndarray | None = None

    @property
    def n_clusters(self) -> int:
        return len(self.centroids)

    @property
    def n_unassigned(self) -> int:
        return int((self.labels < 0).sum())

    @property
    def n_areas(self) -> int:
        return 0 if self.area_of_cluster is None or not len(self.area_of_cluster) else int(self.area_of_cluster.max()) + 1

    def item_areas(self, vectors: np.ndarray) -> np.ndarray:
        """Area index per item: its cluster's, or for an unassigned item the nearest area's."""
        areas = np.full(len(self.labels), -1, dtype=np.int64)
        if not self.n_areas:
            return areas
        assigned = self.labels >= 0
        areas[assigned] = self.area_of_cluster[self.labels[assigned]]
        if (~assigned).any():
            area_centroids = unit_rows(label_sums(self.centroids * self.sizes[:, None], self.area_of_cluster, self.n_areas))
            areas[~assigned] = nearest_centroid(unit_rows(vectors[~assigned]), area_centroids)[0]
        return areas


def cluster_vectors(
    vectors: np.ndarray,
    *,
    params: ClusterParams | None = None,
    random_state: int = 0,
    progress: Callable[[float], None] | None = None,
) -> ClusterResult:
    """Cluster vectors into categories, choosing their number; -1 = unassigned.

    Steps: over-cluster with k-means; Ward-merge the micro-clusters up to the
    scale-independent threshold; refine with spherical k-means; dissolve tiny
    clusters and unassign items far from their centroid. `progress` gets the
    share done, from 0.0 to 1.0.
    """
    params = params or ClusterParams()
    report = progress or (lambda share: None)
    x = unit_rows(vectors)
    n = len(x)
    report(0.0)
    if n == 0:
        report(1.0)
        return _result(x, np.zeros(0, dtype=np.int64), 0)

    micro, means, sizes = _micro_clusters(x, params, random_state)
    report(0.6)
    merges = ward_tree(means, sizes, limit=_ward_threshold(n, params) ** 2)
    fine = merges.cut(merges.m - len(merges.cost))  # group per micro-cluster
    neighbours, reference = _item_neighbours(x, params, random_state)
    report(0.7)
    neighbour_items = reference[neighbours[0]]
    labels = _refined(x, fine[micro], neighbours, reference, params)
    # The rest of the Ward tree, above the threshold: over its groups, so it is small.
    fine_k = int(fine.max()) + 1
    fine_sizes = np.bincount(fine, weights=sizes, minlength=fine_k)
    upper = ward_tree(label_sums(means * sizes[:, None], fine, fine_k) / fine_sizes[:, None], fine_sizes)
    best_k, coarse_k = most_modular_cut(
        upper, fine[micro], neighbour_items, neighbours[1], up_to=fine_k, tolerance=params.coarse_cut_tolerance
    )
    broad = None  # the coarse cut, when its groups are to shape the areas of finer categories
    if best_k < fine_k and params.coarse_modularity_gain < 1:
        # Broad, well-separated classes: the threshold cuts each into pieces
        # that keep finding each other's items as neighbours. Take a coarser
        # cut only when the most modular one is clearly more modular than the
        # threshold cut (see ClusterParams), both judged after the neighbour
        # vote. Judged on the finer cut within the tolerance instead, the
        # demo corpus sat on the bar and fell to 73 categories when its
        # vectors shifted slightly.
        best = _refined(x, upper.cut(best_k)[fine[micro]], neighbours, reference, params)
        gain = modularity(best, neighbour_items, neighbours[1]) - modularity(labels, neighbour_items, neighbours[1])
        if gain > params.coarse_modularity_gain:
            # The finer cut near the peak, as k-means left it: the vote
            # erodes broad classes' boundaries (20 StackOverflow tags: NMI /
            # ARI 67.0-67.6 / 53.7-55.0 with it, 67.9-68.9 / 56.1-57.0 without).
            coarse = _refined(x, upper.cut(coarse_k)[fine[micro]], neighbours, reference, params, vote=False)
            if _pieces_are_real(x, upper, fine[micro], coarse_k, params, random_state):
                # The pieces stay categories; the broad groups shape their areas.
                broad = coarse
            else:
                labels = coarse
    report(0.8)
    labels = _drop_small_clusters(x, labels, params)
    labels = compact_labels(labels)
    k = int(labels.max()) + 1 if (labels >= 0).any() else 0
    result = _result(x, labels, k)
    report(0.9)
    if k:
        result = ClusterResult(
            labels=result.labels,
            centroids=result.centroids,
            sizes=result.sizes,
            similarity=result.similarity,
            area_of_cluster=areas_of_clusters(result.labels, broad, neighbour_items, k, params=params),
        )
    report(1.0)
    return result


def _pieces_are_real(x, upper, leaf: np.ndarray, coarse_k: int, params: ClusterParams, random_state: int) -> bool:
    """Do the broad groups of the coarse cut join pieces that are distinct things (see ClusterParams)?"""
    ratio = split_reality(x, upper, leaf, coarse_k, random_state=random_state)
    return bool(np.isfinite(ratio) and ratio > params.real_split_ratio)


def match_clusters(
    new_centroids: np.ndarray, existing_centroids: np.ndarray, *, min_similarity: float
) -> dict[int, int]:
    """One-to-one map of new cluster index -> existing category index.

    Hungarian matching on cosine similarity (scipy's linear_sum_assignment)
    maximises the summed similarity of the pairs, so two new clusters never
    claim the same category. Only pairs at least `min_similarity` alike
    count: a new cluster without one becomes a new category, and an old
    category without one gets no successor.
    """
    from scipy.optimize import linear_sum_assignment

    if len(new_centroids) == 0 or len(existing_centroids) == 0:
        return {}
    similarity = unit_rows(new_centroids) @ unit_rows(existing_centroids).T
    allowed = similarity >= min_similarity
    # Pairs under the threshold weigh nothing, so the matching never gives up
    # an allowed pair to make room for one that would be thrown away.
    weight = np.where(allowed, 1.0 + similarity, 0.0)
    rows, cols = linear_sum_assignment(weight, maximize=True)
    return {int(r): int(c) for r, c in zip(rows, cols) if allowed[r, c]}


def assign_to_nearest(
    vectors: np.ndarray, centroids: np.ndarray, *, threshold: float = ASSIGN_THRESHOLD
) -> tuple[np.ndarray, np.ndarray]:
    """Index of the most cosine-similar centroid per vector, and that similarity.

    The index is -1 where the best similarity is below `threshold`: an item
    that resembles no category waits for the next cluster run instead.
    """
    x = unit_rows(vectors)
    if len(centroids) == 0:
        return np.full(len(x), -1, dtype=np.int64), np.zeros(len(x), dtype=np.float32)
    index, similarity = nearest_centroid(x, unit_rows(centroids))
    index[similarity < threshold] = -1
    return index, similarity


def _micro_clusters(x: np.ndarray, params: ClusterParams, random_state: int):
    """Labels of the micro-clusters per item, their means (not normalised) and sizes."""
    n = len(x)
    m = min(n, params.max_micro_clusters, max(n // params.items_per_micro_cluster, params.min_micro_clusters))
    if m >= n:
        # Few items: every item is its own micro-cluster, i.e. exact Ward.
        micro = np.arange(n)
    else:
        from sklearn.cluster import KMeans, MiniBatchKMeans

        # Random (not k-means++) seeding: k-means++ costs more than the whole
        # rest at thousands of centres, and the merge step repairs a poor
        # start anyway.
        if n <= _EXACT_KMEANS_MAX_ITEMS:
            model = KMeans(m, init="random", n_init=1, random_state=random_state)
        else:
            model = MiniBatchKMeans(m, init="random", n_init=1, batch_size=4096, random_state=random_state)
        micro = compact_labels(model.fit_predict(x))
    sizes = np.bincount(micro)
    means = label_sums(x, micro, len(sizes)) / sizes[:, None]
    return micro, means, sizes


def _refined(x: np.ndarray, labels: np.ndarray, neighbours, reference: np.ndarray, params: ClusterParams,
             *, vote: bool = True) -> np.ndarray:
    """A few spherical k-means passes from the given labels, then (unless `vote` is false) the neighbour vote."""
    for _ in range(params.refine_iterations):
        labels = compact_labels(nearest_centroid(x, centroids_of(x, labels))[0])
    return _smooth_by_neighbours(labels, neighbours, reference, params) if vote else labels


def _ward_threshold(n: int, params: ClusterParams) -> float:
    """Ward distance at which merging stops, for n items.

    Proportional to sqrt(n), so that the same kind of data gives the same
    categories at any size (see the module docstring); but not below its
    value at merge_min_items, where sampling noise between micro-clusters of
    one category would otherwise stop all merging.
    """
    return params.merge_threshold * math.sqrt(max(n, params.merge_min_items))


# Neighbours are exact up to this many items (n x n cosines); above it they
# are found among a random sample of _SMOOTH_SAMPLE items, which keeps
# 100,000 items to 100,000 x 4,000 cosines.
_SMOOTH_EXACT_ITEMS = 20_000
_SMOOTH_SAMPLE = 4_000


def _item_neighbours(x: np.ndarray, params: ClusterParams, random_state: int):
    """Each item's nearest neighbours (indices into `reference`, and their cosines) and the reference items.

    Exact up to _SMOOTH_EXACT_ITEMS items; above, among a random sample.
    """
    n = len(x)
    exact = n <= _SMOOTH_EXACT_ITEMS
    reference = np.arange(n)
    if not exact:
        reference = np.sort(np.random.default_rng(random_state).choice(n, _SMOOTH_SAMPLE, replace=False))
    k = min(params.smooth_neighbours, len(reference) - 1)
    if k < 1:
        return (np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0), dtype=np.float32)), reference
    return _neighbours(x, x[reference], k, exclude_self=exact), reference


def _smooth_by_neighbours(labels: np.ndarray, neighbours, reference: np.ndarray, params: ClusterParams) -> np.ndarray:
    """Relabel each item by a cosine-weighted vote of its nearest neighbours, for a few rounds."""
    index, weights = neighbours
    n, k = index.shape
    if k == 0 or params.smooth_rounds <= 0:
        return labels
    from scipy.sparse import csr_matrix

    rows = np.repeat(np.arange(n), k)
    items = reference[index]
    for _ in range(params.smooth_rounds):
        votes = csr_matrix((weights.ravel(), (rows, labels[items].ravel())), shape=(n, int(labels.max()) + 1))
        new = np.asarray(votes.argmax(axis=1)).ravel()
        if np.array_equal(new, labels):
            break
        labels = compact_labels(new)
    return labels


def _neighbours(x: np.ndarray, reference: np.ndarray, k: int, *, exclude_self: bool, chunk: int = 2048):
    """Indices into `reference` of each row's k most cosine-similar rows, and those cosines (floored at 0)."""
    index = np.empty((len(x), k), dtype=np.int64)
    weight = np.empty((len(x), k), dtype=np.float32)
    for start in range(0, len(x), chunk):
        s = x[start : start + chunk] @ reference.T
        if exclude_self:
            s[np.arange(len(s)), np.arange(start, start + len(s))] = -np.inf
        top = np.argpartition(-s, k, axis=1)[:, :k]
        index[start : start + chunk] = top
        weight[start : start + chunk] = np.maximum(np.take_along_axis(s, top, axis=1), 0)
    return index, weight


def _drop_small_clusters(x: np.ndarray, labels: np.ndarray, params: ClusterParams) -> np.ndarray:
    """Dissolve clusters under min_cluster_size, then unassign loose items.

    Items of a dissolved cluster move to the nearest remaining centroid;
    every item less similar than min_similarity to its centroid becomes -1.
    """
    counts = np.bincount(labels[labels >= 0], minlength=int(labels.max()) + 1)
    keep = np.flatnonzero(counts >= params.min_cluster_size)
    if len(keep) == 0:
        return np.full(len(x), -1, dtype=np.int64)
    centroids = centroids_of(x, labels)[keep]
    index, similarity = nearest_centroid(x, centroids)
    labels = np.where(np.isin(labels, keep), labels, keep[index])
    own = np.einsum("ij,ij->i", x, centroids_of(x, labels)[labels])
    # The floor is min_similarity, lowered where it would unassign more than
    # max_unassigned_share of the items (long texts have lower cosines).
    floor = min(params.min_similarity, float(np.quantile(own, params.max_unassigned_share)))
    floor = max(floor, params.min_similarity_floor)
    labels[own < floor] = -1
    return labels


def _result(x: np.ndarray, labels: np.ndarray, k: int) -> ClusterResult:
    centroids = centroids_of(x, labels) if k else np.zeros((0, x.shape[1]), dtype=np.float32)
    if k:
        _, similarity = nearest_centroid(x, centroids)
        assigned = labels >= 0
        similarity[assigned] = np.einsum("ij,ij->i", x[assigned], centroids[labels[assigned]])
    else:
        similarity = np.zeros(len(x), dtype=np.float32)
    return ClusterResult(
        labels=labels.astype(np.int64),
        centroids=centroids.astype(np.float32),
        sizes=np.bincount(labels[labels >= 0], minlength=k).astype(np.int64),
        similarity=similarity.astype(np.float32),
    )
