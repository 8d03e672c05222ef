"""Ward agglomeration of micro-clusters, weighted by their sizes, and the cut of its tree that
is most modular on the items' neighbour graph."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labeling.clustering.vectors import compact_labels


def modularity(labels: np.ndarray, neighbour_items: np.ndarray, weights: np.ndarray) -> float:
    """Newman modularity of the labels on the item nearest-neighbour graph (edges symmetrised)."""
    rows = np.repeat(np.arange(len(labels)), neighbour_items.shape[1])
    cols = neighbour_items.ravel()
    w = weights.ravel().astype(np.float64)
    keep = (labels[rows] >= 0) & (labels[cols] >= 0)
    rows, cols, w = rows[keep], cols[keep], w[keep]
    total = 2 * w.sum()
    if total <= 0:
        return 0.0
    inside = 2 * w[labels[rows] == labels[cols]].sum()
    k = int(labels.max()) + 1
    degree = np.bincount(labels[rows], weights=w, minlength=k) + np.bincount(labels[cols], weights=w, minlength=k)
    return float(inside / total - ((degree / total) ** 2).sum())


def most_modular_cut(merges: Merges, leaf: np.ndarray, neighbour_items: np.ndarray, weights: np.ndarray,
                      *, up_to: int, tolerance: float = 0.0) -> tuple[int, int]:
    """The numbers of groups (2..up_to) of a Ward tree whose cut is most modular on the item neighbour graph:
    the argmax, and the finest cut within `tolerance` of it.

    `leaf` is the tree's leaf of each item. Modularity is tracked merge by
    merge on the leaves' graph: merging groups a and b adds
    2 (e_ab / total - d_a d_b / total^2). One m x m matrix, O(m) per merge.
    Near its top the curve is flat, and where exactly it peaks moves with
    the k-means seed (14 or 17 groups for 20 StackOverflow tags), so the
    finest cut within `tolerance` of the best is the one to keep: 17-20 on
    every seed.
    """
    m = merges.m
    if up_to <= 2 or len(merges.cost) < m - up_to:
        return up_to, up_to
    edges = group_graph(leaf, neighbour_items, weights, m)
    total = edges.sum()
    if total <= 0:
        return up_to, up_to
    degree = edges.sum(axis=1)
    q = float(np.trace(edges) / total - ((degree / total) ** 2).sum())
    group = np.arange(m)  # union-find parent: a group is named by one of its leaves

    def root(node: int) -> int:
        while group[node] != node:
            group[node] = group[group[node]]
            node = group[node]
        return node

    modularity_at: dict[int, float] = {}
    for step, (a, b) in enumerate(zip(merges.a.tolist(), merges.b.tolist())):
        k = m - step  # groups before this merge
        if k <= up_to:
            modularity_at[k] = q
        if k <= 2:
            break
        a, b = root(a), root(b)
        q += 2 * (edges[a, b] / total - degree[a] * degree[b] / total**2)
        join_groups(edges, degree, a, b)
        group[b] = a
    if not modularity_at:
        return up_to, up_to
    best_k = max(modularity_at, key=modularity_at.get)
    best = modularity_at[best_k]
    return best_k, max(k for k, q in modularity_at.items() if q >= best - tolerance)


def group_graph(groups: np.ndarray, neighbour_items: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    """k x k symmetric weights of the item neighbour edges between groups (items in group -1 left out)."""
    rows = np.repeat(groups, neighbour_items.shape[1])
    cols = groups[neighbour_items.ravel()]
    keep = (rows >= 0) & (cols >= 0)
    edges = np.zeros((k, k))
    np.add.at(edges, (rows[keep], cols[keep]), weights.ravel().astype(np.float64)[keep])
    return edges + edges.T


def join_groups(edges: np.ndarray, degree: np.ndarray, a: int, b: int) -> None:
    """Fold group b into group a, in place: its edges (the a-b edges become a's own) and its degree."""
    edges[a] += edges[b]
    edges[:, a] += edges[:, b]
    edges[b] = 0
    edges[:, b] = 0
    degree[a] += degree[b]
    degree[b] = 0


@dataclass(frozen=True)
class Merges:
    """A Ward tree: the merges of m groups, cheapest first (a, b: the groups merged)."""

    m: int
    cost: np.ndarray  # squared Ward distance of each merge, ascending
    a: np.ndarray
    b: np.ndarray

    def cut(self, k: int) -> np.ndarray:
        """Group index 0..k-1 per leaf after the m - k cheapest merges."""
        parent = np.arange(self.m)

        def root(node: int) -> int:
            while parent[node] != node:
                parent[node] = parent[parent[node]]
                node = parent[node]
            return node

        for a, b in zip(self.a[: self.m - k].tolist(), self.b[: self.m - k].tolist()):
            parent[root(b)] = root(a)
        return compact_labels(np.array([root(node) for node in range(self.m)]))


def ward_tree(means: np.ndarray, sizes: np.ndarray, *, limit: float = np.inf) -> Merges:
    """The merges of size-weighted Ward agglomeration over the groups, up to a squared cost of `limit`.

    Nearest-neighbour-chain algorithm: follow nearest neighbours until two
    groups are each other's nearest, merge them, go on. Ward is "reducible"
    (a merged group is never closer to a third group than the nearer of its
    parts was), so reciprocal nearest neighbours can be merged at once, and
    sorting the merges by cost gives the same tree as merging cheapest
    first. A group whose nearest neighbour is beyond `limit` is final:
    nothing can come closer later. O(m^2) distance evaluations, one row at a
    time, no m x m matrix.
    """
    m = len(sizes)
    mean = means.astype(np.float64).copy()
    size = sizes.astype(np.float64).copy()
    sq_norm = np.einsum("ij,ij->i", mean, mean)
    open_ = np.ones(m, dtype=bool)
    costs, lefts, rights = [], [], []
    chain: list[int] = []
    while open_.sum() > 1:
        if not chain:
            chain.append(int(np.argmax(open_)))
        a = chain[-1]
        # Squared Ward distance: 2 n_a n_b / (n_a + n_b) * |mean_a - mean_b|^2.
        gap = np.maximum(sq_norm + sq_norm[a] - 2 * (mean @ mean[a]), 0)
        cost = 2 * size * size[a] / (size + size[a]) * gap
        cost[~open_] = np.inf
        cost[a] = np.inf
        b = int(np.argmin(cost))
        if cost[b] > limit:
            open_[a] = False  # a's group is final
            chain.clear()  # the chain was built on a; start afresh
            continue
        if len(chain) > 1 and cost[chain[-2]] <= cost[b]:
            b = chain[-2]  # reciprocal nearest neighbours (ties favour the chain)
            del chain[-2:]
            costs.append(float(cost[b]))
            lefts.append(a)
            rights.append(b)
            mean[a] = (size[a] * mean[a] + size[b] * mean[b]) / (size[a] + size[b])
            sq_norm[a] = mean[a] @ mean[a]
            size[a] += size[b]
            open_[b] = False
        else:
            chain.append(b)
    order = np.argsort(np.array(costs), kind="stable")
    return Merges(
        m=m,
        cost=np.array(costs, dtype=np.float64)[order],
        a=np.array(lefts, dtype=np.int64)[order],
        b=np.array(rights, dtype=np.int64)[order],
    )
