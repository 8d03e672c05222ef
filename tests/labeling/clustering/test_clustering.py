"""labeling.clustering.algorithm on small synthetic data (no database, no Django)."""

from dataclasses import asdict

import numpy as np
import pytest

from labeling.clustering import algorithm
from labeling.clustering.algorithm import (
    DIMENSIONS,
    ClusterParams,
    assign_to_nearest,
    cluster_vectors,
    match_clusters,
)
from labeling.clustering.names import describe_clusters, name_clusters
from labeling.clustering.reconcile import describe

DIM = DIMENSIONS


def unit(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def blobs(n_blobs=6, per_blob=40, *, seed=0, spread=0.75):
    """Well separated categories: random centres (cosine about 0 to each
    other), items at cosine about 0.8 to their centre, like sentence
    embeddings of one intent."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.normal(size=(n_blobs, DIM)))
    truth = np.repeat(np.arange(n_blobs), per_blob)
    noise = spread * rng.normal(size=(len(truth), DIM)) / np.sqrt(DIM)
    order = rng.permutation(len(truth))
    return unit(centres[truth] + noise)[order].astype(np.float32), truth[order]


def same_partition(labels, truth):
    """True when labels and truth group the items identically."""
    pairs = set(zip(labels.tolist(), truth.tolist()))
    return len(pairs) == len(set(labels.tolist())) == len(set(truth.tolist()))


def test_it_finds_the_planted_number_of_clusters_without_being_told_k():
    vectors, truth = blobs(n_blobs=6)

    result = cluster_vectors(vectors)

    assert result.n_clusters == 6
    assert result.n_unassigned == 0
    assert same_partition(result.labels, truth)


def test_it_finds_the_same_clusters_at_two_thousand_and_twenty_thousand_items():
    # The merge threshold grows with sqrt(n), so more items of the same kind
    # do not split categories; 20,000 items also take the mini-batch path.
    small, small_truth = blobs(n_blobs=8, per_blob=250, seed=3)
    large, large_truth = blobs(n_blobs=8, per_blob=2600, seed=3)

    assert cluster_vectors(small).n_clusters == 8
    large_result = cluster_vectors(large)
    assert large_result.n_clusters == 8
    assert same_partition(large_result.labels, large_truth)


def test_outliers_far_from_everything_stay_unassigned():
    vectors, truth = blobs(n_blobs=5)
    outliers = unit(np.random.default_rng(9).normal(size=(4, DIM))).astype(np.float32)

    result = cluster_vectors(np.vstack([vectors, outliers]))

    assert (result.labels[-4:] == -1).all()
    assert (result.labels[:-4] >= 0).all()
    assert result.n_clusters == 5


def test_the_result_is_consistent():
    vectors, _ = blobs(n_blobs=4)

    result = cluster_vectors(vectors)

    assert result.centroids.dtype == np.float32
    assert result.centroids.shape == (4, DIM)
    assert np.allclose(np.linalg.norm(result.centroids, axis=1), 1, atol=1e-5)
    assert result.sizes.sum() == (result.labels >= 0).sum()
    assert result.sizes.tolist() == np.bincount(result.labels[result.labels >= 0]).tolist()
    expected = np.einsum("ij,ij->i", vectors, result.centroids[result.labels])
    assert np.allclose(result.similarity, expected, atol=1e-5)


def test_it_is_deterministic_for_a_fixed_random_state():
    vectors, _ = blobs(n_blobs=8, per_blob=150, seed=1)

    first = cluster_vectors(vectors, random_state=7)
    second = cluster_vectors(vectors, random_state=7)

    assert np.array_equal(first.labels, second.labels)
    assert np.array_equal(first.centroids, second.centroids)


def test_the_mini_batch_path_is_deterministic_too(monkeypatch):
    monkeypatch.setattr(algorithm, "_EXACT_KMEANS_MAX_ITEMS", 100)
    vectors, truth = blobs(n_blobs=5, per_blob=200, seed=2)

    first = cluster_vectors(vectors, random_state=3)
    second = cluster_vectors(vectors, random_state=3)

    assert np.array_equal(first.labels, second.labels)
    assert same_partition(first.labels, truth)


def test_it_reports_progress_from_zero_to_one():
    vectors, _ = blobs(n_blobs=3)
    shares = []

    cluster_vectors(vectors, progress=shares.append)

    assert shares[0] == 0.0 and shares[-1] == 1.0
    assert shares == sorted(shares)


def test_it_copes_with_no_items_and_with_one_item():
    empty = cluster_vectors(np.zeros((0, DIM), dtype=np.float32))
    assert empty.labels.shape == (0,) and empty.centroids.shape == (0, DIM)

    one = cluster_vectors(unit(np.ones((1, DIM))))
    assert one.labels.tolist() == [-1]  # smaller than min_cluster_size
    assert one.n_clusters == 0


def test_params_survive_a_round_trip_through_a_dict():
    params = ClusterParams(merge_threshold=0.06)

    assert ClusterParams(**asdict(params)) == params


def test_match_clusters_maps_permuted_centroids_back_one_to_one():
    existing = unit(np.random.default_rng(4).normal(size=(6, DIM)))
    permutation = np.array([3, 0, 5, 1, 4, 2])
    noise = 0.02 * np.random.default_rng(5).normal(size=(6, DIM))
    new = unit(existing[permutation] + noise)

    matches = match_clusters(new, existing, min_similarity=0.8)

    assert matches == {i: int(permutation[i]) for i in range(6)}


def test_match_clusters_refuses_pairs_under_the_threshold():
    rng = np.random.default_rng(6)
    existing = unit(rng.normal(size=(3, DIM)))
    # Cluster 0 is a near copy of category 2; cluster 1 resembles nothing.
    new = np.vstack([unit(existing[2] + 0.01 * rng.normal(size=DIM)), unit(rng.normal(size=DIM))])

    assert match_clusters(new, existing, min_similarity=0.8) == {0: 2}
    assert match_clusters(new, existing[:0], min_similarity=0.8) == {}


def test_match_clusters_never_gives_one_category_to_two_clusters():
    existing = unit(np.random.default_rng(7).normal(size=(2, DIM)))
    # Both new clusters are closest to category 0; the weaker one gets category 1 only if similar enough.
    new = np.vstack([existing[0], unit(existing[0] + 0.3 * existing[1])])

    matches = match_clusters(new, existing, min_similarity=0.2)

    assert len(set(matches.values())) == len(matches)
    assert matches[0] == 0


def test_assign_to_nearest_follows_the_threshold():
    centroids = np.eye(3, DIM, dtype=np.float32)
    vectors = np.array(
        [
            unit(np.eye(1, DIM, 0)[0] + 0.1 * np.eye(1, DIM, 1)[0]),  # clearly category 0
            unit(np.eye(1, DIM, 2)[0] + 0.9 * np.eye(1, DIM, 5)[0]),  # leans to 2, cosine 0.74
            np.eye(1, DIM, 7)[0],  # like nothing
        ],
        dtype=np.float32,
    )

    index, similarity = assign_to_nearest(vectors, centroids, threshold=0.8)
    assert index.tolist() == [0, -1, -1]
    assert similarity[1] == pytest.approx(1 / np.sqrt(1.81), abs=1e-5)

    index, _ = assign_to_nearest(vectors, centroids, threshold=0.7)
    assert index.tolist() == [0, 2, -1]

    index, _ = assign_to_nearest(vectors, centroids[:0], threshold=0.0)
    assert index.tolist() == [-1, -1, -1]


TEXTS = [
    "my card has not arrived yet, account shows it shipped",
    "new card still not arrived after two weeks",
    "when will my card arrive, account page says shipped",
    "card arrival is taking too long",
    "I want a refund for this purchase on my account",
    "refund the duplicate purchase please",
    "how long does a refund take for a purchase",
    "refund not received for returned purchase, check account",
    "reset my password, cannot log in to my account",
    "password reset email never came",
    "forgot password and cannot log in",
]
TOPICS = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2])


def test_c_tf_idf_keywords_reflect_each_clusters_distinctive_words():
    keywords = describe_clusters(TEXTS, TOPICS, top_n=5)

    assert set(keywords) == {0, 1, 2}
    assert "card" in keywords[0][:2]
    assert "refund" in keywords[1][:2]
    assert "password" in keywords[2][:2]
    # "account" appears in every cluster: it tells them apart from nothing.
    assert all("account" not in words[:3] for words in keywords.values())


def test_c_tf_idf_ignores_unassigned_items():
    labels = TOPICS.copy()
    labels[-3:] = -1

    keywords = describe_clusters(TEXTS, labels)

    assert set(keywords) == {0, 1}
    assert not any("password" in word for words in keywords.values() for word in words)


def test_a_name_is_a_phrase_the_clusters_own_texts_share_and_siblings_never_share_one():
    names = name_clusters(TEXTS, TOPICS)

    assert set(names) == {0, 1, 2}
    assert names[0] == "Card" and names[2] == "Password"
    for cluster, name in names.items():
        inside = [text for text, topic in zip(TEXTS, TOPICS) if topic == cluster]
        outside = [text for text, topic in zip(TEXTS, TOPICS) if topic != cluster]
        # Said by most of the cluster's own texts, by none of the others'.
        assert sum(name.lower() in text for text in inside) >= len(inside) / 2
        assert not any(name.lower() in text for text in outside)
    assert len(set(names.values())) == 3
    # Words common to every cluster ("account") name nothing.
    assert all("account" not in name.lower() for name in names.values())


def test_a_name_never_holds_a_masked_word_and_unassigned_items_take_no_part():
    texts = ["it edited file instead of file", "edited file instead of the other file", "it edited name in file"] * 3
    labels = np.array([0, 0, 0, 1, 1, 1, -1, -1, -1])

    names = name_clusters(texts + TEXTS[:2], np.concatenate([labels, [1, 1]]))

    assert set(names) == {0, 1}
    assert not any(word in {"name", "hash", "link", "n"} for name in names.values() for word in name.lower().split())
    assert names[0] != names[1]


def test_file_where_a_path_was_masked_names_nothing_but_a_file_a_person_wrote_of_does():
    # The recipe masks src/app.py as "file"; people write "the wrong file".
    masked = ["fixed it in file", "then fixed it in file again", "fixed it in file and broke file"]
    written = ["edited the wrong file", "it edited the wrong file again", "edited the wrong file twice"]

    names = name_clusters(masked + written, np.array([0, 0, 0, 1, 1, 1]))

    assert "file" not in names[0].lower().split()
    assert names[0].lower().startswith("fixed")
    assert names[1] == "Edited the wrong file"


def test_a_loose_cluster_whose_texts_share_no_phrase_is_named_from_its_own_words():
    # Cluster 1's texts share nothing with each other; what they share with cluster 0 marks cluster 0.
    texts = ["exchange rate today", "the exchange rate please", "exchange rate for euros"] * 3 + [
        "your salary",
        "quality of this stone",
        "current exchange rate in china",
    ]
    labels = np.array([0] * 9 + [1] * 3)

    names = name_clusters(texts, labels)

    assert "exchange rate" in names[0].lower()
    assert not names[1].startswith("Unnamed")
    assert any(names[1].lower() in text for text in texts[9:])
    assert names[1] != names[0]


def test_a_description_names_each_keyword_once():
    keywords = ["agent asks", "asks unnecessary", "clarification questions", "unnecessary",
                "unnecessary clarification", "clarification", "asks", "questions", "confirm", "step", "more"]

    assert describe(keywords) == (
        "Signals that mention agent asks, asks unnecessary, clarification questions, confirm, step."
    )
    assert describe(["unnecessary"]) == "Signals that mention unnecessary."
    assert describe([]) == ""


def broad_classes(n_classes=6, per_class=400, *, seed=3):
    """Broad, well-separated classes, each a continuum: items mix a dozen directions of their class in
    random proportions (as paragraphs of one topic mix its themes), so the threshold alone cuts each
    class into pieces whose items keep finding each other as neighbours."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.normal(size=(n_classes, DIM)))
    directions = rng.normal(size=(n_classes, 12, DIM)) / np.sqrt(DIM)
    truth = np.repeat(np.arange(n_classes), per_class)
    mix = 4.5 * rng.dirichlet(np.full(12, 0.5), size=len(truth))
    noise = 0.4 * rng.normal(size=(len(truth), DIM)) / np.sqrt(DIM)
    return unit(centres[truth] + np.einsum("nk,nkd->nd", mix, directions[truth]) + noise).astype(np.float32), truth


def test_broad_well_separated_classes_are_not_cut_into_pieces():
    from sklearn.metrics import adjusted_rand_score

    vectors, truth = broad_classes()

    pieces = cluster_vectors(vectors, params=ClusterParams(coarse_modularity_gain=1.0))
    result = cluster_vectors(vectors)

    assert pieces.n_clusters > 5 * 6  # what the threshold alone finds
    assert result.n_clusters == 6
    assert adjusted_rand_score(truth, result.labels) > 0.95


def test_narrow_close_categories_keep_the_threshold_cut():
    # Many small categories near each other: coarser cuts are not clearly more modular.
    vectors, truth = blobs(n_blobs=40, per_blob=25, spread=0.6)

    result = cluster_vectors(vectors)

    assert result.n_clusters == 40
