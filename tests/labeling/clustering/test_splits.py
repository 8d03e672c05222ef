"""labeling.clustering.splits: real pieces against arbitrary cuts of one blob (no database, no Django)."""

import numpy as np

from labeling.clustering.algorithm import DIMENSIONS, ClusterParams
from labeling.clustering.areas import areas_of_clusters
from labeling.clustering.splits import split_reality, top_splits
from labeling.clustering.ward import Merges, ward_tree


def unit(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _root_split_ratio(x: np.ndarray) -> float:
    """The test's ratio for the last Ward merge over the items (each item its own leaf)."""
    merges = ward_tree(x.astype(np.float64), np.ones(len(x)))
    return split_reality(x, merges, np.arange(len(x)), 1, random_state=0)


def test_a_blob_cut_in_two_separates_held_out_items_no_better_than_a_blob_does():
    rng = np.random.default_rng(0)
    centre = unit(rng.normal(size=DIMENSIONS))
    blob = unit(centre + 0.8 * rng.normal(size=(160, DIMENSIONS)) / np.sqrt(DIMENSIONS))

    assert _root_split_ratio(blob) < ClusterParams().real_split_ratio


def test_two_distinct_groups_separate_held_out_items_far_better_than_a_blob_does():
    rng = np.random.default_rng(0)
    centre = unit(rng.normal(size=DIMENSIONS))
    # Two intents of one domain: centres at cosine about 0.5 to each other, items spread about each.
    centres = unit(centre + rng.normal(size=(2, DIMENSIONS)) / np.sqrt(DIMENSIONS))
    truth = np.repeat([0, 1], 80)
    groups = unit(centres[truth] + 0.8 * rng.normal(size=(160, DIMENSIONS)) / np.sqrt(DIMENSIONS))

    assert _root_split_ratio(groups) > ClusterParams().real_split_ratio


def test_top_splits_gives_each_groups_last_merge():
    # Leaves 0-1 merge, then 2-3, then the two pairs.
    merges = Merges(m=4, cost=np.array([1.0, 2.0, 3.0]), a=np.array([0, 2, 0]), b=np.array([1, 3, 2]))

    assert sorted(top_splits(merges, 2)) == [([0], [1]), ([2], [3])]
    assert top_splits(merges, 1) == [([0, 1], [2, 3])]
    assert top_splits(merges, 4) == []


def test_with_broad_groups_each_category_takes_the_area_most_of_its_items_are_in():
    labels = np.array([0, 0, 1, 1, 2, 2, 3, 3, 3, -1])
    # Two of category 3's three items are in broad group 1; the unsorted item takes no part.
    broad = np.array([0, 0, 0, 0, 1, 1, 1, 1, 0, 0])
    neighbours = np.zeros((len(labels), 1), dtype=np.int64)

    areas = areas_of_clusters(labels, broad, neighbours, 4, params=ClusterParams())

    assert areas.tolist() == [0, 0, 1, 1]


def test_a_lopsided_group_is_judged_whichever_side_its_small_part_is_on():
    rng = np.random.default_rng(1)
    centres = unit(rng.normal(size=(2, DIMENSIONS)))
    x = unit(centres[np.repeat([0, 1], [1000, 10])] + 0.5 * rng.normal(size=(1010, DIMENSIONS)) / np.sqrt(DIMENSIONS))
    leaf = np.repeat([0, 1], [1000, 10])
    big_first = Merges(m=2, cost=np.array([1.0]), a=np.array([0]), b=np.array([1]))
    small_first = Merges(m=2, cost=np.array([1.0]), a=np.array([1]), b=np.array([0]))

    ratios = [split_reality(x, merges, leaf, 1, random_state=0) for merges in (big_first, small_first)]

    assert all(np.isfinite(ratio) and ratio > ClusterParams().real_split_ratio for ratio in ratios)


def test_repeated_texts_with_no_spread_are_not_judged_infinitely_apart():
    # Two sides, each one vector repeated: no spread to measure a gap against.
    rng = np.random.default_rng(2)
    x = np.repeat(unit(rng.normal(size=(2, DIMENSIONS))), 20, axis=0)
    merges = Merges(m=2, cost=np.array([1.0]), a=np.array([0]), b=np.array([1]))

    assert np.isnan(split_reality(x, merges, np.repeat([0, 1], 20), 1, random_state=0))
