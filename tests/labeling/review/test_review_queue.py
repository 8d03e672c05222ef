"""/review/ and /review/next: queues, locks that keep two reviewers apart, skip, progress."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from labeling.models import Area, Category, DoubleReview, Label, ReviewLock
from labeling.review import services as review_services
from labeling.review.queues import queue_parse, queue_progress
from tests.factories import client_for
from tests.factories.review import category_make, item_make, user_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def category():
    return category_make("Edits the wrong file", status="confirmed")


@pytest.fixture
def items(source, category):
    return [item_make(source, category=category) for _ in range(4)]


def next_item_id(client, key) -> int:
    response = client.get(f"/review/next?category={key}")
    assert response.status_code == 302, response
    path, _, query = response.url.partition("?")
    assert query == f"queue={key}", response.url
    return int(path.strip("/").split("/")[-1])


def test_next_locks_the_first_open_item_and_opens_it_in_queue_mode(reviewer, items, category):
    client = client_for(reviewer)
    assert next_item_id(client, category.id) == items[0].id
    lock = ReviewLock.objects.get()
    assert (lock.item_id, lock.reviewer) == (items[0].id, reviewer)
    assert timedelta(minutes=9) < lock.expires_at - timezone.now() <= timedelta(minutes=10)
    response = client.get(f"/items/{items[0].id}/?queue={category.id}")
    html = response.content.decode()
    assert "Queue:" in html and "Edits the wrong file" in html
    assert f'data-next-url="/review/next?category={category.id}"' in html


def test_asking_again_gives_the_reviewer_their_own_locked_item_back(reviewer, items, category):
    client = client_for(reviewer)
    first = next_item_id(client, category.id)
    assert next_item_id(client, category.id) == first
    assert ReviewLock.objects.count() == 1


def test_two_reviewers_asking_for_next_never_get_the_same_item(reviewer, second_reviewer, items, category):
    rita, sam = client_for(reviewer), client_for(second_reviewer)
    handed = [next_item_id(rita, category.id), next_item_id(sam, category.id)]
    assert handed == [items[0].id, items[1].id]
    # Rita labels hers; neither gets it again, nor Sam's locked one.
    rita.post(f"/items/{handed[0]}/?queue={category.id}", {"verdict": "failure", "split": "none"})
    assert next_item_id(rita, category.id) == items[2].id


def test_a_live_lock_of_another_reviewer_is_skipped_and_an_expired_one_taken_over(
    reviewer, second_reviewer, items, category
):
    now = timezone.now()
    ReviewLock.objects.create(item=items[0], reviewer=second_reviewer, expires_at=now + timedelta(minutes=5))
    ReviewLock.objects.create(item=items[1], reviewer=second_reviewer, expires_at=now - timedelta(seconds=1))
    assert next_item_id(client_for(reviewer), category.id) == items[1].id
    lock = ReviewLock.objects.get(item=items[1])
    assert lock.reviewer == reviewer and lock.expires_at > now
    assert ReviewLock.objects.get(item=items[0]).reviewer == second_reviewer


def test_the_lock_cannot_be_taken_while_another_reviewer_holds_it(reviewer, second_reviewer, items):
    assert review_services.review_lock_take(item_id=items[0].id, reviewer=reviewer)
    assert not review_services.review_lock_take(item_id=items[0].id, reviewer=second_reviewer)
    assert ReviewLock.objects.get().reviewer == reviewer


def test_a_reviewer_holds_one_lock_at_a_time(reviewer, items, category, source):
    other_category = category_make("Other")
    other_item = item_make(source, category=other_category)
    client = client_for(reviewer)
    next_item_id(client, category.id)
    assert next_item_id(client, other_category.id) == other_item.id
    assert list(ReviewLock.objects.values_list("item_id", flat=True)) == [other_item.id]


def test_items_labelled_by_anyone_are_not_handed_out_again(reviewer, second_reviewer, items, category):
    Label.objects.create(item=items[0], reviewer=reviewer, verdict="failure")
    Label.objects.create(item=items[1], reviewer=second_reviewer, verdict="failure")
    assert next_item_id(client_for(reviewer), category.id) == items[2].id


def test_skip_releases_the_lock_moves_on_and_the_item_returns_when_the_queue_runs_dry(reviewer, items, category):
    client = client_for(reviewer)
    for expected in items:
        current = next_item_id(client, category.id)
        assert current == expected.id
        response = client.post("/review/skip", {"item": str(current), "category": str(category.id)})
        assert response.status_code == 302 and response.url == f"/review/next?category={category.id}"
        assert not ReviewLock.objects.filter(item_id=current).exists()
    response = client.get(f"/review/next?category={category.id}", follow=True)
    assert "the 4 you skipped; they are back now" in response.content.decode()
    assert next_item_id(client, category.id) == items[0].id


def test_an_empty_queue_says_so(reviewer, category):
    response = client_for(reviewer).get(f"/review/next?category={category.id}", follow=True)
    assert response.redirect_chain[-1][0] == f"/review/?category={category.id}"
    assert "Nothing left in “Edits the wrong file” for you." in response.content.decode()
    assert not ReviewLock.objects.exists()


@pytest.mark.parametrize("key", ["", "nonsense", "999999"])
def test_an_unknown_queue_is_refused_with_a_message(reviewer, items, key):
    response = client_for(reviewer).get(f"/review/next?category={key}", follow=True)
    assert response.redirect_chain[-1][0] == "/review/"
    assert "Pick a queue" in response.content.decode()
    assert not ReviewLock.objects.exists()


def test_a_merged_category_is_no_queue(reviewer, items, category):
    category.status = "merged"
    category.save()
    response = client_for(reviewer).get(f"/review/next?category={category.id}", follow=True)
    assert "Pick a queue" in response.content.decode()


def test_the_unassigned_queue_holds_failures_without_a_category(reviewer, source, items):
    thumbs_up = item_make(source, rating=1)
    failure = item_make(source)
    report = item_make(source, kind="report", rating=None, title="Broke the build")
    client = client_for(reviewer)
    handed = {next_item_id(client, "unassigned")}
    client.post("/review/skip", {"item": str(min(handed)), "category": "unassigned"})
    handed.add(next_item_id(client, "unassigned"))
    assert handed == {failure.id, report.id} and thumbs_up.id not in handed


def test_the_double_review_queue_hands_an_item_to_a_second_reviewer_only(reviewer, second_reviewer, items):
    third = user_make("tia", "reviewer")
    Label.objects.create(item=items[0], reviewer=reviewer, verdict="failure")
    DoubleReview.objects.create(item=items[0])
    # The first reviewer has nothing to do in it...
    response = client_for(reviewer).get("/review/next?category=double", follow=True)
    assert "Nothing left in “Double review” for you." in response.content.decode()
    # ...a second one gets the item...
    sam = client_for(second_reviewer)
    assert next_item_id(sam, "double") == items[0].id
    sam.post(f"/items/{items[0].id}/?queue=double", {"verdict": "not_failure", "split": "none"})
    # ...and with two reviews it is done.
    response = client_for(third).get("/review/next?category=double", follow=True)
    assert "Nothing left" in response.content.decode()


def test_the_double_review_queue_offers_items_reviewed_once_first(reviewer, second_reviewer, items):
    DoubleReview.objects.create(item=items[0])
    DoubleReview.objects.create(item=items[1])
    Label.objects.create(item=items[1], reviewer=second_reviewer, verdict="failure")
    assert next_item_id(client_for(reviewer), "double") == items[1].id


def test_progress_counts_the_reviewed_items_of_the_queue(reviewer, second_reviewer, items, category):
    Label.objects.create(item=items[0], reviewer=second_reviewer, verdict="failure")
    queue = queue_parse(key=str(category.id))
    progress = queue_progress(queue=queue)
    assert (progress.done, progress.total, progress.percent) == (1, 4, 25)
    html = client_for(reviewer).get(f"/items/{items[1].id}/?queue={category.id}").content.decode()
    assert '<progress id="queue-progress" max="4" value="1">' in html and "1 / 4 reviewed" in html


def test_the_queue_page_lists_every_queue_with_its_progress(reviewer, second_reviewer, items, category):
    category_make("Archived one", status="archived")
    Label.objects.create(item=items[0], reviewer=second_reviewer, verdict="failure")
    response = client_for(reviewer).get(f"/review/?category={category.id}")
    html = response.content.decode()
    assert "Unassigned items" in html and "Double review" in html
    assert f'<option value="{category.id}" selected>Edits the wrong file (1 / 4)</option>' in html
    assert "Archived one" not in html


def test_the_queue_page_groups_the_category_queues_by_area_largest_first(reviewer, source):
    tests_area, files_area = Area.objects.create(name="Tests and verification"), Area.objects.create(name="Files")
    small = category_make("Skips a test", size=2)
    big = category_make("Claims the suite passed", size=9)
    wrong = category_make("Edits the wrong file", size=5)
    category_make("Not placed yet", size=1)
    Category.objects.filter(id__in=[small.id, big.id]).update(area=tests_area)
    Category.objects.filter(id=wrong.id).update(area=files_area)

    html = client_for(reviewer).get("/review/").content.decode()

    table = html[html.index('<table class="queues">'):]
    order = ["Unassigned items", "Files", "Edits the wrong file", "Tests and verification", "Claims the suite passed",
             "Skips a test", "No area yet", "Not placed yet"]
    positions = [table.index(text) for text in order]
    assert positions == sorted(positions)
    assert f'<a href="/areas/{files_area.id}/">Files</a>' in table
    assert '<optgroup label="Tests and verification">' in html and '<optgroup label="No area yet">' in html
    assert html.index('<optgroup label="Files">') < html.index(f'<option value="{wrong.id}"') < html.index("</optgroup>")


def test_the_queue_page_takes_a_bounded_number_of_queries(reviewer, source, django_assert_max_num_queries):
    for n in range(10):
        category = category_make(f"Category {n}")
        for _ in range(3):
            item_make(source, category=category)
    client = client_for(reviewer)
    # Two more than before the queue orders: the items labelled out of their queue, and the reviewer counts.
    with django_assert_max_num_queries(10):
        assert client.get("/review/").status_code == 200


def test_in_queue_mode_previous_is_the_item_reviewed_before(reviewer, items, category):
    client = client_for(reviewer)
    for _ in range(2):
        current = next_item_id(client, category.id)
        client.post(f"/items/{current}/?queue={category.id}", {"verdict": "failure", "split": "none"})
    current = next_item_id(client, category.id)
    assert current == items[2].id
    context = client.get(f"/items/{current}/?queue={category.id}").context
    assert context["previous_url"] == f"/items/{items[1].id}/?queue={category.id}"
    context = client.get(f"/items/{items[1].id}/?queue={category.id}").context
    assert context["previous_url"] == f"/items/{items[0].id}/?queue={category.id}"


def all_at_once(reviewers, *, act, prepare=lambda user: user) -> dict:
    """Each reviewer in a thread of its own: `prepare(user)`, then, all released together, `act` on what it
    prepared; {username: what act returned}. An exception in any thread fails the test."""
    results: dict = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(reviewers))

    def run(user):
        try:
            prepared = prepare(user)
            start.wait()
            results[user.username] = act(prepared)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(user,)) for user in reviewers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return results


@pytest.mark.django_db(transaction=True)
def test_reviewers_asking_at_the_same_moment_never_get_the_same_item(source):
    category = category_make("Busy")
    for _ in range(12):
        item_make(source, category=category)
    reviewers = [user_make(f"reviewer{n}", "reviewer") for n in range(6)]
    handed = all_at_once(reviewers, prepare=client_for, act=lambda client: next_item_id(client, category.id))
    assert len(handed) == 6 and len(set(handed.values())) == 6
    assert ReviewLock.objects.count() == 6


@pytest.mark.django_db(transaction=True)
def test_taking_locks_from_the_same_candidates_at_once_hands_each_item_to_one_reviewer(source):
    category = category_make("Busy")
    item_ids = [item_make(source, category=category).id for _ in range(8)]
    reviewers = [user_make(f"reviewer{n}", "reviewer") for n in range(6)]
    # Every reviewer saw the same free items a moment ago: the race the lock must settle.
    taken = all_at_once(
        reviewers, act=lambda user: review_services.review_next_take(reviewer=user, candidates=item_ids)
    )
    assert None not in taken.values() and len(set(taken.values())) == 6
    assert sorted(ReviewLock.objects.values_list("item_id", flat=True)) == sorted(taken.values())
