"""Which label is the truth: disputed items stay out of exports until an admin or a third reviewer settles them."""

import csv
import json
import threading

import pytest
from django.db import connection
from django.utils import timezone

from exports import writing
from feedback.models import FeedbackItem
from labeling.models import (
    Assignment,
    AuditEvent,
    Category,
    DoubleReview,
    Label,
    Settlement,
)
from labeling.review.agreement import disputes_list
from labeling.review.services import SettlementRefused, dispute_settle, label_save
from tests.factories.exports import dataset_make, export, item_make, member_ids
from tests.factories import client_for, user_make

pytestmark = pytest.mark.django_db

F, N = Label.Verdict.FAILURE, Label.Verdict.NOT_FAILURE


@pytest.fixture
def people(db):
    return {
        "ann": user_make("ann", "reviewer"),
        "bob": user_make("bob", "reviewer"),
        "cat": user_make("cat", "reviewer"),
        "ada": user_make("ada", "admin"),
    }


@pytest.fixture
def wrong_file(db):
    return Category.objects.create(name="Edits the wrong file", status=Category.Status.CONFIRMED)


@pytest.fixture
def claims(db):
    return Category.objects.create(name="Claims tests pass", status=Category.Status.CONFIRMED)


def disputed_item(people, wrong_file, **fields):
    """An item in double review: ann says failure (with a hint), bob, reviewing blind, says not a failure."""
    item = item_make(**fields)
    label_save(item=item, reviewer=people["ann"], verdict=F, category=wrong_file, hint="Edit utils.py, not main.py.")
    DoubleReview.objects.create(item=item)
    label_save(item=item, reviewer=people["bob"], verdict=N)
    return item


def csv_rows(version) -> dict[int, dict]:
    folder = writing.version_folder(version=version)
    with open(folder / "items.csv", encoding="utf-8", newline="") as handle:
        return {int(row["id"]): row for row in csv.DictReader(handle)}


def manifest(version) -> dict:
    return json.loads((writing.version_folder(version=version) / "manifest.json").read_text())


def settle(client, disputed, kept, **fields):
    """POST the agreement page's settle form: keep `kept`, with `fields` written over the form's values."""
    data = {"item": disputed.id, "label": kept.id, "seen": kept.updated_at.isoformat(), **fields}
    return client.post("/agreement/settle", data)


# --- Labels: a relabel replaces, another reviewer's label never silently does ------------


def test_a_reviewers_relabel_replaces_their_own_earlier_label(people, wrong_file, export_root):
    item = item_make()
    label_save(item=item, reviewer=people["ann"], verdict=N)
    label_save(item=item, reviewer=people["ann"], verdict=F, category=wrong_file, hint="Edit utils.py.")

    assert Label.objects.filter(item=item).count() == 1
    assert disputes_list().open == []
    version = export(dataset_make("relabelled"))
    row = csv_rows(version)[item.id]
    assert (row["verdict"], row["category"], row["hint"]) == ("failure", "Edits the wrong file", "Edit utils.py.")
    assert version.counts["disputed_left_out"] == 0


def test_another_reviewers_differing_label_makes_a_dispute_instead_of_replacing(people, wrong_file, export_root):
    disputed = disputed_item(people, wrong_file)
    agreed = item_make(comment="It claimed the tests pass.")
    label_save(item=agreed, reviewer=people["ann"], verdict=F, category=wrong_file)

    assert Label.objects.filter(item=disputed).count() == 2
    [dispute] = disputes_list().open
    assert dispute.item == disputed and [label.reviewer for label in dispute.labels] == [people["ann"], people["bob"]]

    version = export(dataset_make("train-set", formats=("csv", "chat_jsonl")))
    # Neither label is exported as the truth: the item waits, and everything else is written.
    assert member_ids(version) == {agreed.id}
    assert set(csv_rows(version)) == {agreed.id}
    assert manifest(version)["counts"]["disputed_left_out"] == 1
    assert version.counts["disputed_left_out"] == 1


def test_reviewers_who_agree_on_verdict_and_category_make_no_dispute(people, wrong_file, export_root):
    item = item_make()
    label_save(item=item, reviewer=people["ann"], verdict=F, category=wrong_file)
    label_save(item=item, reviewer=people["bob"], verdict=F, category=wrong_file, hint="Open utils.py first.")

    assert disputes_list().open == []
    version = export(dataset_make("agreed"))
    assert csv_rows(version)[item.id]["hint"] == "Open utils.py first."
    assert version.counts["disputed_left_out"] == 0


def test_two_failures_in_different_categories_are_a_dispute(people, wrong_file, claims, export_root):
    item = item_make()
    label_save(item=item, reviewer=people["ann"], verdict=F, category=wrong_file)
    label_save(item=item, reviewer=people["bob"], verdict=F, category=claims)

    assert [d.item for d in disputes_list().open] == [item]
    version = export(dataset_make("categories"))
    assert member_ids(version) == set() and version.counts["disputed_left_out"] == 1


# --- Settling ---------------------------------------------------------------------------


def test_a_settled_dispute_is_exported_with_the_settled_label_and_audited(people, wrong_file, export_root):
    item = disputed_item(people, wrong_file)
    dataset = dataset_make("train-set", formats=("csv",))
    before = export(dataset)
    assert member_ids(before) == set()
    kept = Label.objects.get(item=item, reviewer=people["ann"])

    response = settle(client_for(people["ada"]), item, kept)

    assert response.status_code == 302 and response["Location"] == "/agreement/"
    settlement = Settlement.objects.get(item=item)
    assert (settlement.verdict, settlement.category, settlement.settled_by) == (F, wrong_file, people["ada"])
    event = AuditEvent.objects.get(item=item, action="settled dispute")
    assert event.actor == people["ada"] and event.category == wrong_file
    assert event.details["verdict"] == "failure" and event.details["kept"] == "ann's label"
    assert "bob's label: not_failure" in event.details["labels"]
    # The settled category is the item's assignment now, as a reviewer's decision.
    assignment = Assignment.objects.get(item=item)
    assert (assignment.category, assignment.assigned_by) == (wrong_file, Assignment.By.REVIEWER)

    after = export(dataset)
    row = csv_rows(after)[item.id]
    assert (row["verdict"], row["category"], row["hint"]) == ("failure", "Edits the wrong file", "Edit utils.py, not main.py.")
    assert after.counts["disputed_left_out"] == 0 and manifest(after)["counts"]["disputed_left_out"] == 0
    assert disputes_list().open == [] and [d.item for d in disputes_list().settled] == [item]


def test_a_third_reviewer_settles_with_a_verdict_and_category_of_their_own(people, wrong_file, claims, export_root):
    item = disputed_item(people, wrong_file)
    kept = Label.objects.get(item=item, reviewer=people["ann"])

    response = settle(client_for(people["cat"]), item, kept, verdict="failure", category=claims.id)

    assert response.status_code == 302
    row = csv_rows(export(dataset_make("written")))[item.id]
    # The written category, with the kept label's hint.
    assert (row["verdict"], row["category"], row["hint"]) == ("failure", "Claims tests pass", "Edit utils.py, not main.py.")
    event = AuditEvent.objects.get(item=item, action="settled dispute")
    assert event.actor == people["cat"] and event.details["changed"] == "verdict or category written by the settler"


def test_a_settlement_to_not_a_failure_keeps_no_category(people, wrong_file, export_root):
    item = disputed_item(people, wrong_file)
    kept = Label.objects.get(item=item, reviewer=people["ann"])
    assert settle(client_for(people["ada"]), item, kept, verdict="not_failure").status_code == 302
    version = export(dataset_make("not-failures", filters={"verdicts": ["not_failure"]}))
    assert csv_rows(version)[item.id]["verdict"] == "not_failure"
    assert Settlement.objects.get(item=item).category is None


def test_a_reviewer_who_gave_one_of_the_labels_may_not_settle(people, wrong_file):
    item = disputed_item(people, wrong_file)
    kept = Label.objects.get(item=item, reviewer=people["bob"])

    response = settle(client_for(people["bob"]), item, kept)

    assert response.status_code == 403
    assert "you gave one of these labels" in response.content.decode()
    assert not Settlement.objects.exists() and not AuditEvent.objects.filter(action="settled dispute").exists()
    # A person without the reviewer role is refused before anything is read.
    outsider = user_make("olga")
    assert settle(client_for(outsider), item, kept).status_code == 403
    assert not Settlement.objects.exists()


def test_the_second_of_two_settlements_is_told_it_is_settled_already(people, wrong_file):
    item = disputed_item(people, wrong_file)
    ann, bob = Label.objects.get(item=item, reviewer=people["ann"]), Label.objects.get(item=item, reviewer=people["bob"])
    assert settle(client_for(people["ada"]), item, ann).status_code == 302

    response = settle(client_for(people["cat"]), item, bob)

    assert response.status_code == 409
    assert f"#{item.id} was not settled: ada settled this item already." in response.content.decode()
    assert Settlement.objects.get(item=item).verdict == F
    assert AuditEvent.objects.filter(action="settled dispute").count() == 1


@pytest.mark.parametrize(
    ("fields", "status", "message"),
    [
        ({"label": ""}, 422, "Say which label to keep."),
        ({"item": "x"}, 422, "Say which item to settle."),
        ({"category": "abc"}, 422, "That is not a category."),
        ({"verdict": "maybe"}, 422, "unknown verdict &#x27;maybe&#x27;"),
        ({"seen": "2000-01-01T00:00:00+00:00"}, 409, "ann&#x27;s label changed since the page was loaded"),
    ],
)
def test_a_settlement_that_breaks_a_rule_is_refused_with_a_reason(people, wrong_file, fields, status, message):
    item = disputed_item(people, wrong_file)
    kept = Label.objects.get(item=item, reviewer=people["ann"])

    response = settle(client_for(people["ada"]), item, kept, **fields)

    assert response.status_code == status
    assert message in response.content.decode()
    assert not Settlement.objects.exists()
    # The page still lists the dispute, ready to be settled.
    assert f'id="dispute-{item.id}"' in response.content.decode()


def test_a_label_of_another_item_or_a_closed_category_is_refused(people, wrong_file, claims):
    item = disputed_item(people, wrong_file)
    other = disputed_item(people, wrong_file, comment="Another one.")
    foreign = Label.objects.get(item=other, reviewer=people["ann"])
    with pytest.raises(SettlementRefused, match="not one of this item's") as refused:
        dispute_settle(item_id=item.id, label_id=foreign.id, settled_by=people["ada"])
    assert (refused.value.status, refused.value.field) == (422, "label")

    Category.objects.filter(id=claims.id).update(status=Category.Status.ARCHIVED)
    kept = Label.objects.get(item=item, reviewer=people["ann"])
    with pytest.raises(SettlementRefused, match="merged or archived") as refused:
        dispute_settle(item_id=item.id, label_id=kept.id, settled_by=people["ada"], verdict=F, category_id=claims.id)
    assert refused.value.field == "category"


def test_items_whose_reviewers_agree_have_nothing_to_settle(people, wrong_file):
    item = item_make()
    label_save(item=item, reviewer=people["ann"], verdict=N)
    label_save(item=item, reviewer=people["bob"], verdict=N)
    kept = Label.objects.get(item=item, reviewer=people["ann"])
    response = settle(client_for(people["ada"]), item, kept)
    assert response.status_code == 409
    assert "the reviewers agree on this item: there is nothing to settle" in response.content.decode()


def test_a_label_changed_after_the_settlement_reopens_the_dispute(people, wrong_file, export_root):
    item = disputed_item(people, wrong_file)
    dataset = dataset_make("train-set")
    kept = Label.objects.get(item=item, reviewer=people["ann"])
    settle(client_for(people["ada"]), item, kept)
    assert member_ids(export(dataset)) == {item.id}

    # Bob changes his mind about the severity: what was settled no longer covers his label.
    label_save(item=item, reviewer=people["bob"], verdict=N, severity="high")

    reopened = export(dataset)
    assert member_ids(reopened) == set() and reopened.counts["disputed_left_out"] == 1
    [dispute] = disputes_list().open
    assert dispute.reopened
    page = client_for(people["cat"]).get("/agreement/").content.decode()
    assert "Reopened: a label changed after ada settled it." in page

    # Settling again is allowed, and replaces the earlier settlement.
    bob = Label.objects.get(item=item, reviewer=people["bob"])
    assert settle(client_for(people["cat"]), item, bob).status_code == 302
    assert Settlement.objects.get(item=item).verdict == N
    assert AuditEvent.objects.get(item=item, action="settled dispute", actor=people["cat"]).details["reopened"]


def test_a_version_with_disputed_items_left_out_is_rewritten_byte_identically(people, wrong_file, export_root):
    disputed_item(people, wrong_file)
    item_make(comment="Kept.")
    version = export(dataset_make("verified", formats=("csv", "chat_jsonl")))
    assert version.counts["disputed_left_out"] == 1
    check = writing.dataset_version_verify(version=version)
    assert check.identical, check.differing


# --- The agreement page -------------------------------------------------------------------


def test_the_agreement_page_lists_disputes_with_settle_buttons_for_those_who_may(people, wrong_file):
    item = disputed_item(people, wrong_file)

    admin_page = client_for(people["ada"]).get("/agreement/")
    third_page = client_for(people["cat"]).get("/agreement/")
    party_page = client_for(people["ann"]).get("/agreement/")

    for response in (admin_page, third_page, party_page):
        html = response.content.decode()
        assert response.status_code == 200
        assert "Disagreements to settle (1)" in html and f'id="dispute-{item.id}"' in html
        assert "Edit utils.py, not main.py." in html and "Not a failure" in html
    assert admin_page.content.decode().count("Keep this label") == 2
    assert third_page.content.decode().count("Keep this label") == 2
    assert "Keep this label" not in party_page.content.decode()
    assert "You gave a label in each of these" in party_page.content.decode()


def test_every_review_page_still_answers_for_reviewers_and_admins(people, wrong_file):
    item = disputed_item(people, wrong_file)
    settled = disputed_item(people, wrong_file, comment="Settled one.")
    settle(client_for(people["ada"]), settled, Label.objects.get(item=settled, reviewer=people["ann"]))
    pages = ["/", "/agreement/", "/review/", f"/items/{item.id}/", f"/items/{settled.id}/", "/search/"]
    for person in ("ann", "bob", "cat", "ada"):
        client = client_for(people[person])
        for page in pages:
            assert client.get(page).status_code == 200, (person, page)
    html = client_for(people["ada"]).get("/agreement/").content.decode()
    assert "Settled (1)" in html and f'href="/items/{settled.id}/"' in html


def test_a_third_reviewer_opening_the_item_still_reviews_it_blind(people, wrong_file):
    """The item page keeps double review blind; the labels are shown where disputes are settled."""
    item = disputed_item(people, wrong_file)
    html = client_for(people["cat"]).get(f"/items/{item.id}/").content.decode()
    assert "Edit utils.py, not main.py." not in html


# --- Two people settling at the same moment (PostgreSQL row locks) --------------------------


@pytest.mark.django_db(transaction=True)
def test_of_two_settlements_at_the_same_moment_one_wins_and_the_other_is_told(people, wrong_file):
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; SQLite runs one writer at a time")
    item = disputed_item(people, wrong_file)
    labels = list(Label.objects.filter(item=item).order_by("created_at"))
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def attempt(settler, label):
        try:
            barrier.wait()
            dispute_settle(item_id=item.id, label_id=label.id, settled_by=settler)
            outcomes.append("settled")
        except SettlementRefused as exc:
            outcomes.append(f"{exc.status}")
        finally:
            connection.close()  # this thread's own connection, so the test database can be dropped

    threads = [
        threading.Thread(target=attempt, args=(people["ada"], labels[0])),
        threading.Thread(target=attempt, args=(people["cat"], labels[1])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["409", "settled"]
    assert Settlement.objects.filter(item=item).count() == 1
    assert AuditEvent.objects.filter(item=item, action="settled dispute").count() == 1
    assert FeedbackItem.objects.filter(id=item.id).exists()
    assert timezone.now() >= Settlement.objects.get(item=item).settled_at
