"""Areas: categories grouped by how their items' nearest neighbours link them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from labeling.clustering.vectors import compact_labels
from labeling.clustering.ward import group_graph, join_groups

if TYPE_CHECKING:
    from labeling.clustering.algorithm import ClusterParams


def areas_of_clusters(
    labels: np.ndarray, broad: np.ndarray | None, neighbour_items: np.ndarray, k: int, *, params: ClusterParams
) -> np.ndarray:
    """Area index per category: grouped from the categories themselves, or, when `broad` (a coarser
    labelling of the items, 0..n-1 with every item in one) is given, from its groups, each category
    taking its items' most common area.

    Grouped from the broad groups, the demo corpus keeps 2.2's planted
    regression in one area that the comparison flags; grouped from its 75-83
    real pieces, the theme spread over several areas, none significant."""
    if broad is None:
        return group_into_areas(labels, neighbour_items, k, params=params)
    area_of_broad = group_into_areas(broad, neighbour_items, int(broad.max()) + 1, params=params)
    assigned = labels >= 0
    votes = np.zeros((k, int(area_of_broad.max()) + 1), dtype=np.int64)
    np.add.at(votes, (labels[assigned], area_of_broad[broad[assigned]]), 1)
    return compact_labels(votes.argmax(axis=1))


def group_into_areas(
    labels: np.ndarray, neighbours: np.ndarray, n_clusters: int, *, params: ClusterParams
) -> np.ndarray:
    """Area index per cluster: greedy modularity merging of the clusters' nearest-neighbour graph.

    Two clusters are joined while that raises the modularity (resolution
    `area_resolution`) of the graph whose edges are each item's nearest
    neighbours: categories whose items keep finding each other's items as
    neighbours form an area, and the number of areas follows from the data,
    never from being told. Then merged further, cheapest first, down to
    `max_areas`. Unassigned items (-1) take no part.
    """
    k = n_clusters
    if k <= params.min_areas:
        return np.arange(k, dtype=np.int64)
    edges = group_graph(labels, neighbours, np.ones(neighbours.shape), k)
    total = max(edges.sum(), 1.0)
    degree = edges.sum(axis=1)
    group = np.arange(k)
    alive = np.ones(k, dtype=bool)
    while alive.sum() > params.min_areas:
        live = np.flatnonzero(alive)
        gain = edges[np.ix_(live, live)] / total - params.area_resolution * np.outer(degree[live], degree[live]) / total**2
        np.fill_diagonal(gain, -np.inf)
        i, j = np.unravel_index(int(np.argmax(gain)), gain.shape)
        if gain[i, j] <= 0 and alive.sum() <= params.max_areas:
            break
        a, b = live[i], live[j]
        join_groups(edges, degree, a, b)
        alive[b] = False
        group[group == b] = a
    return compact_labels(group)
