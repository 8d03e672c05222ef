"""/agreement/: double-review samples, Cohen's kappa per category, disagreements to settle."""

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.models import AuditEvent, DoubleReview, Label
from labeling.review.agreement import agreement_summary, verdict_kappa
from labeling.review.services import double_reviews_request
from tests.factories.review import category_make, item_make

pytestmark = pytest.mark.django_db

F, N = "failure", "not_failure"


def double_reviewed(source, first_reviewer, second_reviewer, pairs, *, category=None, assigned=None):
    """Items in double review, each with two labels in order: (first verdict, second verdict[, second category])."""
    made = []
    start = timezone.now() - timedelta(hours=1)
    for n, pair in enumerate(pairs):
        first, second = pair[:2]
        second_category = pair[2] if len(pair) > 2 else category
        item = item_make(source, category=assigned)
        DoubleReview.objects.create(item=item)
        Label.objects.create(
            item=item, reviewer=first_reviewer, verdict=first, category=category if first == F else None,
            created_at=start + timedelta(seconds=2 * n),
        )
        Label.objects.create(
            item=item, reviewer=second_reviewer, verdict=second,
            category=second_category if second == F else None, created_at=start + timedelta(seconds=2 * n + 1),
        )
        made.append(item)
    return made


def hand_kappa(first, second):
    """Cohen's kappa from its definition: (p_o - p_e) / (1 - p_e)."""
    n = len(first)
    observed = sum(a == b for a, b in zip(first, second)) / n
    classes = set(first) | set(second)
    expected = sum((first.count(c) / n) * (second.count(c) / n) for c in classes)
    return (observed - expected) / (1 - expected)


def test_kappa_per_category_matches_a_hand_computation(source, reviewer, second_reviewer):
    wrong_file = category_make("Edits the wrong file")
    claims = category_make("Claims tests pass")
    # 4 of 6 agree; each reviewer says failure 3 times: p_o = 2/3, p_e = 1/2, kappa = 1/3.
    pairs_a = [(F, F), (F, F), (F, N), (N, N), (N, F), (N, N)]
    double_reviewed(source, reviewer, second_reviewer, pairs_a, category=wrong_file, assigned=wrong_file)
    # 3 of 4 agree, the second reviewer always says failure: p_o = 3/4 = p_e, kappa = 0.
    pairs_b = [(F, F), (F, F), (F, F), (N, F)]
    double_reviewed(source, reviewer, second_reviewer, pairs_b, category=claims, assigned=claims)

    summary = agreement_summary()
    rows = {row.category.name: row for row in summary.rows}
    assert rows["Edits the wrong file"].kappa == pytest.approx(1 / 3)
    assert rows["Edits the wrong file"].kappa == pytest.approx(hand_kappa([p[0] for p in pairs_a], [p[1] for p in pairs_a]))
    assert (rows["Edits the wrong file"].items, rows["Edits the wrong file"].agreed) == (6, 4)
    assert rows["Claims tests pass"].kappa == pytest.approx(0.0)
    assert (rows["Claims tests pass"].items, rows["Claims tests pass"].agreed) == (4, 3)
    everything = pairs_a + pairs_b
    assert summary.overall.kappa == pytest.approx(hand_kappa([p[0] for p in everything], [p[1] for p in everything]))
    assert summary.requested == 10 and summary.waiting == 0


def test_an_items_category_is_its_first_labels_else_its_assignments(source, reviewer, second_reviewer):
    labelled = category_make("From the label")
    assigned = category_make("From the assignment")
    # The first label names a category: that one counts, not the assignment.
    double_reviewed(source, reviewer, second_reviewer, [(F, F)], category=labelled, assigned=assigned)
    # The first label is "not a failure" (no category): the assignment counts.
    double_reviewed(source, reviewer, second_reviewer, [(N, N)], assigned=assigned)
    rows = {row.category.name: row.items for row in agreement_summary().rows}
    assert rows == {"From the label": 1, "From the assignment": 1}


def test_kappa_is_undefined_when_both_reviewers_always_gave_the_same_verdict():
    assert verdict_kappa([F, F, F], [F, F, F]) is None
    assert verdict_kappa([], []) is None
    assert verdict_kappa([F, N], [F, N]) == pytest.approx(1.0)


def test_the_page_shows_kappa_counts_and_the_disagreements_to_settle(client, source, reviewer, second_reviewer):
    wrong_file = category_make("Edits the wrong file")
    other = category_make("Other failure")
    items = double_reviewed(
        source, reviewer, second_reviewer,
        [(F, F), (F, N), (N, N), (F, F, other)],
        category=wrong_file, assigned=wrong_file,
    )
    Label.objects.filter(item=items[1], reviewer=second_reviewer).update(hint="second-opinion-hint")
    client.force_login(reviewer)
    response = client.get("/agreement/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Edits the wrong file" in html
    expected = hand_kappa([F, F, N, F], [F, N, N, F])
    assert f'<td class="num kappa">{expected:.2f}</td>' in html
    disagreements = response.context["summary"].disagreements
    # A different verdict, and two failures put in different categories.
    assert [pair.item for pair in disagreements] == [items[1], items[3]]
    assert f'href="/items/{items[1].id}/"' in html and f'href="/items/{items[3].id}/"' in html
    assert "second-opinion-hint" in html and "Other failure" in html
    assert "Disagreements to settle (2)" in html


def test_items_still_waiting_for_their_second_review_are_counted_but_not_scored(source, reviewer):
    item = item_make(source)
    DoubleReview.objects.create(item=item)
    Label.objects.create(item=item, reviewer=reviewer, verdict=F)
    summary = agreement_summary()
    assert (summary.requested, summary.waiting, summary.overall.items, summary.rows) == (1, 1, 0, [])


def test_the_agreement_page_takes_a_bounded_number_of_queries(
    client, source, reviewer, second_reviewer, django_assert_max_num_queries
):
    for n in range(5):
        category = category_make(f"Category {n}")
        double_reviewed(source, reviewer, second_reviewer, [(F, F), (F, N), (N, N)], category=category)
    client.force_login(reviewer)
    # The summary's queries, and the disputes' labels and settlements; as many for 15 items as for one.
    with django_assert_max_num_queries(9):
        assert client.get("/agreement/").status_code == 200


# --- Requesting a sample -------------------------------------------------------------


def labelled_items(source, reviewer, n, category=None):
    items = [item_make(source, category=category) for _ in range(n)]
    for item in items:
        Label.objects.create(item=item, reviewer=reviewer, verdict=F)
    return items


def test_an_admin_requests_a_random_sample_of_labelled_items(client, source, reviewer, admin_user):
    items = labelled_items(source, reviewer, 10)
    item_make(source)  # never labelled: not sampled
    client.force_login(admin_user)
    response = client.post("/agreement/sample", {"count": "4"}, follow=True)
    assert "4 items are waiting for a second review." in response.content.decode()
    sampled = set(DoubleReview.objects.values_list("item_id", flat=True))
    assert len(sampled) == 4 and sampled <= {item.id for item in items}
    assert set(DoubleReview.objects.values_list("requested_by", flat=True)) == {admin_user.id}
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.details) == ("requested double review", admin_user, {"items": 4, "asked for": 4})
    # A second request picks other items.
    client.post("/agreement/sample", {"count": "4"})
    assert DoubleReview.objects.count() == 8


def test_a_sample_can_be_limited_to_one_category(source, reviewer, admin_user):
    wanted = category_make("Wanted")
    in_category = labelled_items(source, reviewer, 3, category=wanted)
    labelled_items(source, reviewer, 5, category=category_make("Other"))
    created = double_reviews_request(requested_by=admin_user, count=10, category=wanted, rng=random.Random(1))
    assert {d.item_id for d in created} == {item.id for item in in_category}


@pytest.mark.parametrize(
    "data, message",
    [
        ({"count": "0"}, "Ensure this value is greater than or equal to 1."),
        ({"count": "501"}, "Ensure this value is less than or equal to 500."),
        ({"count": "many"}, "Enter a whole number."),
        ({"count": "5", "category": "999999"}, "That category does not exist or was merged or archived"),
    ],
)
def test_a_bad_sample_request_is_refused_with_a_message_and_creates_nothing(client, source, reviewer, admin_user, data, message):
    labelled_items(source, reviewer, 3)
    client.force_login(admin_user)
    response = client.post("/agreement/sample", data)
    assert response.status_code == 422
    html = response.content.decode()
    assert "Nothing was requested" in html and message in html
    assert not DoubleReview.objects.exists() and not AuditEvent.objects.exists()


def test_a_sample_with_nothing_to_pick_says_so(client, admin_user):
    client.force_login(admin_user)
    response = client.post("/agreement/sample", {"count": "3"}, follow=True)
    assert "No labelled items are left to sample; nothing was requested." in response.content.decode()
    assert not DoubleReview.objects.exists()
