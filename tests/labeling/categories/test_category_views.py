"""/categories/: the list, a category's page and the decisions taken on it."""

import re
import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from feedback.models import FeedbackItem
from labeling.categories import selectors
from labeling.models import Assignment, AuditEvent, Category
from tests.factories import source_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def source():
    return source_make()[0]


def item_make(source, *, rating=-1, kind="rating", version="2.1", variant="A", days_ago=0.0, comment="it broke"):
    return FeedbackItem.objects.create(
        source=source, external_id=uuid.uuid4().hex, kind=kind, rating=rating, comment=comment,
        model_version=version, variant=variant, occurred_at=timezone.now() - timedelta(days=days_ago),
        receipt_id=uuid.uuid4(), status=FeedbackItem.Status.ASSIGNED,
    )


def category_make(name, items=(), *, status=Category.Status.PROPOSED, by=Assignment.By.MODEL, **fields) -> Category:
    category = Category.objects.create(name=name, status=status, size=len(items), **fields)
    Assignment.objects.bulk_create([Assignment(item=item, category=category, assigned_by=by) for item in items])
    return category


def category_links(html: str) -> int:
    return len(re.findall(r'<a href="/categories/\d+/">', html))


def snapshot():
    return (
        list(Category.objects.order_by("id").values_list(
            "id", "name", "description", "status", "merged_into", "size", "named_by_reviewer"
        )),
        list(Assignment.objects.order_by("id").values_list("item", "category", "assigned_by", "reviewer")),
        AuditEvent.objects.count(),
    )


@pytest.fixture
def pair(source):
    """Two proposed categories with items, for the decisions to act on."""
    first = category_make("wrong file", [item_make(source) for _ in range(3)], keywords=["wrong", "file"])
    second = category_make("claims tests pass", [item_make(source) for _ in range(2)])
    return first, second


def actions(category_id: int, other_id: int, item_id: int):
    """Every POST on a category, with a body that would succeed for a reviewer."""
    return [
        (f"/categories/{category_id}/edit", {"name": "New name", "description": ""}),
        (f"/categories/{category_id}/confirm", {}),
        (f"/categories/{category_id}/archive", {}),
        (f"/categories/{category_id}/merge", {"target": other_id}),
        (f"/categories/{category_id}/split", {"name": "Split off", "items": [item_id]}),
        (f"/categories/{category_id}/delete", {}),
    ]


# --- Who may do what -------------------------------------------------------------------


def test_anonymous_users_are_sent_to_login_and_change_nothing(client, pair):
    first, second = pair
    item_id = first.assignments.first().item_id
    for url in ["/categories/", f"/categories/{first.id}/", f"/categories/{first.id}/edit"]:
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith(f"/login/?next={url}")
    before = snapshot()
    for url, data in actions(first.id, second.id, item_id):
        response = client.post(url, data)
        assert response.status_code == 302 and response.url.startswith("/login/"), url
    assert snapshot() == before


def test_users_without_a_role_get_403_everywhere_and_change_nothing(nobody, pair):
    first, second = pair
    item_id = first.assignments.first().item_id
    for url in ["/categories/", f"/categories/{first.id}/", f"/categories/{first.id}/edit"]:
        response = nobody.get(url)
        assert response.status_code == 403, url
        assert b"needs the reviewer role" in response.content
    before = snapshot()
    for url, data in actions(first.id, second.id, item_id):
        assert nobody.post(url, data).status_code == 403, url
    assert snapshot() == before


def test_a_reviewer_may_not_delete_a_category(reviewer, source):
    empty = category_make("empty proposal")
    response = reviewer.post(f"/categories/{empty.id}/delete")
    assert response.status_code == 403 and b"needs the admin role" in response.content
    assert Category.objects.filter(id=empty.id).exists()


def test_an_admin_deletes_an_empty_category_but_not_one_with_items(admin, pair):
    empty = category_make("empty proposal")
    response = admin.post(f"/categories/{empty.id}/delete", follow=True)
    assert response.status_code == 200 and "Deleted “empty proposal”." in response.content.decode()
    assert not Category.objects.filter(id=empty.id).exists()
    first, _ = pair
    before = snapshot()
    response = admin.post(f"/categories/{first.id}/delete")
    assert response.status_code == 409
    assert "still has items or labels" in response.content.decode()
    assert snapshot() == before


def test_admins_can_do_what_reviewers_can(admin, pair):
    first, _ = pair
    assert admin.get("/categories/").status_code == 200
    assert admin.post(f"/categories/{first.id}/confirm").status_code == 302
    first.refresh_from_db()
    assert first.status == Category.Status.CONFIRMED


@pytest.mark.parametrize("method, suffix", [
    ("get", "/"), ("get", "/edit"), ("post", "/edit"), ("post", "/confirm"), ("post", "/archive"),
    ("post", "/merge"), ("post", "/split"),
])
def test_a_category_that_does_not_exist_is_404(reviewer, pair, method, suffix):
    missing = Category.objects.order_by("-id").first().id + 100
    before = snapshot()
    response = getattr(reviewer, method)(f"/categories/{missing}{suffix}", {"target": pair[0].id, "name": "x"})
    assert response.status_code == 404
    assert snapshot() == before


def test_an_admin_deleting_a_category_that_does_not_exist_gets_404(admin):
    assert admin.post("/categories/999999/delete").status_code == 404


def test_actions_refuse_get_requests(reviewer, pair):
    first, second = pair
    for suffix in ["confirm", "archive", "merge", "split", "delete"]:
        response = reviewer.get(f"/categories/{first.id}/{suffix}")
        assert response.status_code in (403, 405), suffix  # delete is admin-only before anything else
    first.refresh_from_db()
    assert first.status == Category.Status.PROPOSED


# --- The list ----------------------------------------------------------------------------


def test_the_list_shows_size_share_of_thumbs_down_reports_growth_and_keywords(reviewer, source):
    items = (
        [item_make(source, days_ago=1) for _ in range(3)]
        + [item_make(source, days_ago=9)]
        + [item_make(source, kind="report", rating=None, days_ago=2)]
    )
    category_make("Edits the wrong file", items, keywords=["wrong", "file", "utils"])
    category_make("Other", [item_make(source, days_ago=10) for _ in range(4)])
    item_make(source)  # an unassigned thumbs-down still counts in the whole

    page = reviewer.get("/categories/").content.decode()

    assert category_links(page) == 2
    row = page.split("Edits the wrong file")[1].split("</tr>")[0]
    # 4 of the 9 thumbs-down; the report is counted on its own.
    assert "44.4%" in row and "(4)" in row
    assert '<td class="num">1</td>' in row
    # 4 in the last 7 days against 1 in the 7 days before.
    assert "+3" in row and "+300%" in row
    assert "utils" in row
    other = page.split(">Other<")[1].split("</tr>")[0]
    assert "-4" in other and "-100%" in other


def test_growth_against_an_empty_previous_week_says_new(reviewer, source):
    category_make("fresh", [item_make(source, days_ago=1)])
    row = reviewer.get("/categories/").content.decode().split(">fresh<")[1].split("</tr>")[0]
    assert "+1" in row and "new" in row


def test_by_default_merged_archived_and_empty_proposed_categories_are_hidden(reviewer, source):
    target = category_make("Live proposal", [item_make(source)])
    category_make("Confirmed but empty", status=Category.Status.CONFIRMED)
    category_make("Empty proposal")
    category_make("Was merged", status=Category.Status.MERGED, merged_into=target)
    category_make("Was archived", [item_make(source)], status=Category.Status.ARCHIVED)

    page = reviewer.get("/categories/").content.decode()
    assert "Live proposal" in page and "Confirmed but empty" in page
    for hidden in ["Empty proposal", "Was merged", "Was archived"]:
        assert hidden not in page

    everything = reviewer.get("/categories/?status=all").content.decode()
    for name in ["Live proposal", "Confirmed but empty", "Empty proposal", "Was merged", "Was archived"]:
        assert name in everything
    archived = reviewer.get("/categories/?status=archived").content.decode()
    assert "Was archived" in archived and "Live proposal" not in archived


def test_the_list_filters_by_name_and_by_model_version(reviewer, source):
    category_make("Edits the wrong file", [item_make(source, version="2.1"), item_make(source, version="2.2")])
    category_make("Claims tests pass", [item_make(source, version="2.1")])

    found = reviewer.get("/categories/?q=WRONG").content.decode()
    assert "Edits the wrong file" in found and "Claims tests pass" not in found

    version = reviewer.get("/categories/?model_version=2.2").content.decode()
    assert "Edits the wrong file" in version and "Claims tests pass" not in version
    row = version.split("Edits the wrong file")[1].split("</tr>")[0]
    assert '<td class="num">1</td>' in row and "100.0%" in row  # only 2.2's one item, of 2.2's one thumbs-down
    assert '<option value="2.2" selected>' in version


@pytest.mark.parametrize("sort, expected", [
    ("size", ["Wide", "Alpha", "Mini"]),
    ("name", ["Alpha", "Mini", "Wide"]),
    ("growth", ["Mini", "Alpha", "Wide"]),
    ("newest", ["Wide", "Mini", "Alpha"]),
])
def test_the_list_sorts_by_size_name_growth_and_age(reviewer, source, sort, expected):
    base = timezone.now() - timedelta(days=3)
    category_make("Wide", [item_make(source, days_ago=20) for _ in range(5)], created_at=base + timedelta(hours=2))
    category_make("Alpha", [item_make(source, days_ago=1)] + [item_make(source, days_ago=20) for _ in range(2)],
                  created_at=base)
    category_make("Mini", [item_make(source, days_ago=1) for _ in range(2)], created_at=base + timedelta(hours=1))
    page = reviewer.get(f"/categories/?sort={sort}").content.decode()
    positions = [page.index(f">{name}</a>") for name in expected]
    assert positions == sorted(positions)


def test_the_list_shows_50_categories_a_page(reviewer, source):
    item = item_make(source)
    for i in range(51):
        category_make(f"Category {i:02d}", status=Category.Status.CONFIRMED)
    Assignment.objects.create(item=item, category=Category.objects.get(name="Category 50"))
    first = reviewer.get("/categories/").content.decode()
    assert category_links(first) == 50
    assert "Page 1 of 2" in first and "?page=2" in first
    second = reviewer.get("/categories/?page=2").content.decode()
    assert category_links(second) == 1


@pytest.mark.parametrize("how_many", [5, 50])
def test_the_list_costs_the_same_queries_for_5_or_50_categories(reviewer, source, django_assert_max_num_queries, how_many):
    for i in range(how_many):
        items = [item_make(source, days_ago=i % 12), item_make(source, kind="report", rating=None)]
        category_make(f"Category {i}", items, keywords=["a", "b"])
    # 10: the categories, their counts of all time and of the last two weeks, the areas and theirs.
    with django_assert_max_num_queries(10):
        response = reviewer.get("/categories/?sort=growth")
    assert response.status_code == 200
    assert category_links(response.content.decode()) == how_many


# --- A category's page -----------------------------------------------------------------


def test_the_page_shows_representatives_items_versions_and_history(reviewer, source):
    items = [
        item_make(source, version="2.1", comment="edited main.py instead of utils.py"),
        item_make(source, version="2.2", comment="changed the wrong module"),
        item_make(source, version="2.2", rating=1, comment="fine actually"),
        item_make(source, kind="report", rating=None, version="2.2", comment="report: wrong file"),
    ]
    category = category_make("Edits the wrong file", items, representative_ids=[items[1].id, 999999, items[0].id])
    AuditEvent.objects.create(category=category, action="confirmed", details={"status": "x"})

    page = reviewer.get(f"/categories/{category.id}/").content.decode()

    reps = page.split('id="category-representatives"')[1].split("</section>")[0]
    assert reps.index(f'/items/{items[1].id}/') < reps.index(f'/items/{items[0].id}/')
    assert "changed the wrong module" in reps and "999999" not in reps
    for item in items:
        assert f'href="/items/{item.id}/"' in page
    versions = page.split('id="category-versions"')[1].split("</section>")[0]
    assert "<td>2.2</td><td class=\"num\">1</td><td class=\"num\">1</td><td class=\"num\">1</td><td class=\"num\">3</td>" in versions
    assert "confirmed" in page.split('id="audit-trail"')[1]


def test_the_item_list_filters_by_rating_version_variant_and_who_assigned(reviewer, source):
    down_21_a = item_make(source, version="2.1", variant="A")
    up_22_b = item_make(source, version="2.2", variant="B", rating=1)
    report = item_make(source, kind="report", rating=None, version="2.2", variant="A")
    placed = item_make(source, version="2.1", variant="B")
    category = category_make("mixed", [down_21_a, up_22_b, report])
    Assignment.objects.create(item=placed, category=category, assigned_by=Assignment.By.REVIEWER)

    def shown(query):
        page = reviewer.get(f"/categories/{category.id}/?{query}").content.decode()
        items = page.split('id="category-items"')[1]
        return {i.id for i in (down_21_a, up_22_b, report, placed) if f'href="/items/{i.id}/"' in items}

    assert shown("rating=down") == {down_21_a.id, placed.id}
    assert shown("rating=up") == {up_22_b.id}
    assert shown("rating=none") == {report.id}
    assert shown("model_version=2.2") == {up_22_b.id, report.id}
    assert shown("variant=B") == {up_22_b.id, placed.id}
    assert shown("assigned_by=reviewer") == {placed.id}
    assert shown("rating=down&variant=B") == {placed.id}


def test_the_item_list_pages_by_50(reviewer, source):
    category = category_make("big", [item_make(source) for _ in range(55)])
    page = reviewer.get(f"/categories/{category.id}/").content.decode()
    assert page.count('name="items"') == 50 and "Page 1 of 2" in page
    second = reviewer.get(f"/categories/{category.id}/?page=2").content.decode()
    assert second.count('name="items"') == 5


@pytest.mark.parametrize("how_many", [3, 60])
def test_a_category_page_costs_the_same_queries_however_many_items(reviewer, source, django_assert_max_num_queries,
                                                                    how_many):
    items = [item_make(source, version=f"2.{i % 3}", variant="AB"[i % 2]) for i in range(how_many)]
    category = category_make("busy", items, representative_ids=[i.id for i in items[:5]])
    Assignment.objects.filter(item__in=items[:2]).update(
        assigned_by=Assignment.By.REVIEWER, reviewer=get_user_model().objects.get(username="rita")
    )
    category_make("target")
    # 12th: the custom scrub patterns, once (tests start without them kept); 13-15: the bulk bar's
    # categories and datasets, and the bulk history.
    with django_assert_max_num_queries(15):
        assert reviewer.get(f"/categories/{category.id}/").status_code == 200


# --- Rename ------------------------------------------------------------------------------


def test_a_reviewer_renames_a_category_inline_with_htmx(reviewer, pair):
    first, _ = pair
    form = reviewer.get(f"/categories/{first.id}/edit", headers={"HX-Request": "true"})
    assert form.status_code == 200 and b"<html" not in form.content
    assert b'name="name" value="wrong file"' in form.content

    response = reviewer.post(
        f"/categories/{first.id}/edit", {"name": "Edits the wrong file", "description": "Picks main.py"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert '<h1>Edits the wrong file</h1>' in html and "named by a reviewer" in html
    assert 'hx-swap-oob="true"' in html and "renamed" in html
    first.refresh_from_db()
    assert first.name == "Edits the wrong file" and first.description == "Picks main.py" and first.named_by_reviewer
    assert AuditEvent.objects.get(category=first).action == "renamed"


def test_without_htmx_a_rename_goes_back_to_the_category_page(reviewer, pair):
    first, _ = pair
    assert b"<html" in reviewer.get(f"/categories/{first.id}/edit").content
    response = reviewer.post(f"/categories/{first.id}/edit", {"name": "Edits the wrong file", "description": ""},
                             follow=True)
    assert response.redirect_chain == [(f"/categories/{first.id}/", 302)]
    assert "Saved “Edits the wrong file”." in response.content.decode()


@pytest.mark.parametrize("htmx", [True, False])
def test_a_rename_to_an_empty_name_shows_an_error_and_changes_nothing(reviewer, pair, htmx):
    first, _ = pair
    before = snapshot()
    headers = {"HX-Request": "true"} if htmx else {}
    response = reviewer.post(f"/categories/{first.id}/edit", {"name": "   ", "description": "kept?"}, headers=headers)
    assert response.status_code == 422
    html = response.content.decode()
    assert 'role="alert">A category needs a name.' in html
    assert "kept?" in html  # what was typed stays in the form
    assert snapshot() == before


# --- Confirm, archive --------------------------------------------------------------------


def test_confirm_and_archive_change_the_status_and_show_in_the_history(reviewer, pair):
    first, _ = pair
    response = reviewer.post(f"/categories/{first.id}/confirm", follow=True)
    assert "Confirmed “wrong file”." in response.content.decode()
    response = reviewer.post(f"/categories/{first.id}/archive", follow=True)
    html = response.content.decode()
    assert "Archived “wrong file”." in html
    history = html.split('id="audit-trail"')[1]
    assert "rita</strong> archived" in history and "rita</strong> confirmed" in history
    first.refresh_from_db()
    assert first.status == Category.Status.ARCHIVED
    assert list(AuditEvent.objects.filter(category=first).values_list("action", flat=True)) == ["archived", "confirmed"]


def test_confirming_twice_is_refused_with_a_message(reviewer, pair):
    first, _ = pair
    reviewer.post(f"/categories/{first.id}/confirm")
    before = snapshot()
    response = reviewer.post(f"/categories/{first.id}/confirm")
    assert response.status_code == 409 and "is already confirmed" in response.content.decode()
    assert snapshot() == before


# --- Merge -------------------------------------------------------------------------------


def test_a_merge_moves_every_item_to_the_target_and_shows_the_target(reviewer, pair, source):
    first, second = pair
    placed = item_make(source)
    Assignment.objects.create(item=placed, category=first, assigned_by=Assignment.By.REVIEWER)
    moved_ids = set(first.assignments.values_list("item_id", flat=True))

    response = reviewer.post(f"/categories/{first.id}/merge", {"target": second.id}, follow=True)

    assert response.redirect_chain == [(f"/categories/{second.id}/", 302)]
    assert "Merged “wrong file” into “claims tests pass”" in response.content.decode()
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == Category.Status.MERGED and first.merged_into == second
    assert moved_ids <= set(second.assignments.values_list("item_id", flat=True))
    assert second.size == 6 and first.size == 0
    assert Assignment.objects.get(item=placed).assigned_by == Assignment.By.REVIEWER
    merged_page = reviewer.get(f"/categories/{first.id}/").content.decode()
    assert f'Merged into <a href="/categories/{second.id}/">claims tests pass</a>' in merged_page


def test_a_merge_into_itself_is_refused_with_a_message(reviewer, pair):
    first, _ = pair
    before = snapshot()
    response = reviewer.post(f"/categories/{first.id}/merge", {"target": first.id})
    assert response.status_code == 422
    assert "A category cannot be merged into itself." in response.content.decode()
    assert snapshot() == before


def test_a_merge_into_a_merged_category_is_refused_with_a_message(reviewer, pair, source):
    first, second = pair
    gone = category_make("gone", status=Category.Status.MERGED, merged_into=second)
    before = snapshot()
    response = reviewer.post(f"/categories/{first.id}/merge", {"target": gone.id})
    assert response.status_code == 422
    assert "“gone” is merged; merge into a proposed or confirmed category." in response.content.decode()
    assert snapshot() == before


@pytest.mark.parametrize("target", ["", "abc", "-1", str(2**70)])
def test_a_merge_without_a_target_asks_for_one(reviewer, pair, target):
    first, _ = pair
    before = snapshot()
    response = reviewer.post(f"/categories/{first.id}/merge", {"target": target})
    assert response.status_code == 422 and "Choose the category to merge into." in response.content.decode()
    assert snapshot() == before


def test_the_merge_menu_offers_only_other_open_categories(reviewer, pair):
    first, second = pair
    category_make("gone", status=Category.Status.MERGED, merged_into=second)
    category_make("retired", status=Category.Status.ARCHIVED)
    menu = reviewer.get(f"/categories/{first.id}/").content.decode().split('id="merge-target"')[1].split("</select>")[0]
    assert f'value="{second.id}"' in menu
    assert f'value="{first.id}"' not in menu and "gone" not in menu and "retired" not in menu


# --- Split -------------------------------------------------------------------------------


def test_a_split_creates_a_confirmed_category_with_exactly_the_chosen_items(reviewer, pair):
    first, _ = pair
    ids = list(first.assignments.order_by("item_id").values_list("item_id", flat=True))
    response = reviewer.post(f"/categories/{first.id}/split", {"name": "Claims success", "items": ids[:2]}, follow=True)
    new = Category.objects.get(name="Claims success")
    assert response.redirect_chain == [(f"/categories/{new.id}/", 302)]
    assert "Split 2 items into the new category “Claims success”." in response.content.decode()
    assert new.status == Category.Status.CONFIRMED and new.named_by_reviewer
    assert sorted(new.assignments.values_list("item_id", flat=True)) == ids[:2]
    assert list(first.assignments.values_list("item_id", flat=True)) == ids[2:]
    rita = get_user_model().objects.get(username="rita")
    assert set(new.assignments.values_list("assigned_by", "reviewer")) == {(Assignment.By.REVIEWER, rita.id)}


def test_a_split_without_a_name_keeps_the_selection_and_changes_nothing(reviewer, pair):
    first, _ = pair
    ids = list(first.assignments.order_by("item_id").values_list("item_id", flat=True))
    before = snapshot()
    response = reviewer.post(f"/categories/{first.id}/split?rating=down", {"name": "", "items": ids[:1]})
    assert response.status_code == 422
    html = response.content.decode()
    assert "A category needs a name." in html
    assert f'value="{ids[0]}" aria-label="Select item {ids[0]}" checked' in html
    assert f'value="{ids[1]}" aria-label="Select item {ids[1]}">' in html
    assert snapshot() == before


@pytest.mark.parametrize("items", [[], ["x"], [str(2**70)]])
def test_a_split_without_a_valid_selection_is_refused(reviewer, pair, items):
    first, _ = pair
    before = snapshot()
    response = reviewer.post(f"/categories/{first.id}/split", {"name": "New", "items": items})
    assert response.status_code == 422
    assert snapshot() == before


def test_a_split_of_items_from_another_category_is_refused(reviewer, pair):
    first, second = pair
    foreign = second.assignments.first().item_id
    before = snapshot()
    response = reviewer.post(f"/categories/{first.id}/split", {"name": "New", "items": [foreign]})
    assert response.status_code == 422 and "no longer in “wrong file”" in response.content.decode()
    assert snapshot() == before


# --- Suggested merges ----------------------------------------------------------------------


def centre_at(base, cosine: float, seed: int) -> bytes:
    """A unit vector with exactly this cosine to `base`, as a stored centroid."""
    other = np.random.default_rng(seed).standard_normal(base.shape[0])
    other -= (other @ base) * base
    other /= np.linalg.norm(other)
    return (cosine * base + np.sqrt(1 - cosine**2) * other).astype(np.float32).tobytes()


def test_close_categories_are_suggested_as_a_merge_into_the_confirmed_or_bigger_one(reviewer, source):
    base = np.zeros(384)
    base[0] = 1.0
    items = [item_make(source) for _ in range(9)]
    kept = category_make("Edits the wrong file", items[:2], status=Category.Status.CONFIRMED, centroid=centre_at(base, 1.0, 1))
    piece = category_make("Changed another file", items[2:5], centroid=centre_at(base, 0.9, 2))
    big = category_make("Modified wrong module", items[5:8], centroid=centre_at(base, 0.8, 3))
    far = category_make("Claims tests pass", items[8:], centroid=centre_at(base, 0.1, 4))
    category_make("Merged long ago", [item_make(source)], status=Category.Status.MERGED, centroid=centre_at(base, 0.99, 5))

    suggestions = selectors.merge_suggestions()

    # The closest pair first; each category in one pair at most; the confirmed one stays.
    assert [(s.source.id, s.target.id) for s in suggestions] == [(piece.id, kept.id)]
    assert suggestions[0].percent == 90
    assert far.id not in {s.source.id for s in suggestions} | {s.target.id for s in suggestions}
    html = reviewer.get("/categories/").content.decode()
    assert 'id="merge-suggestions"' in html and f'action="/categories/{piece.id}/merge"' in html
    assert f'name="target" value="{kept.id}"' in html

    # Accepting it is the ordinary merge; then the next pair comes up.
    reviewer.post(f"/categories/{piece.id}/merge", {"target": kept.id})
    assert Category.objects.get(id=piece.id).status == Category.Status.MERGED
    assert [(s.source.id, s.target.id) for s in selectors.merge_suggestions()] == [(big.id, kept.id)]


def test_no_suggestions_below_the_threshold(reviewer, source):
    base = np.zeros(384)
    base[0] = 1.0
    category_make("a", [item_make(source)], centroid=centre_at(base, 1.0, 1))
    category_make("b", [item_make(source)], centroid=centre_at(base, 0.7, 2))
    assert selectors.merge_suggestions() == []
    assert 'id="merge-suggestions"' not in reviewer.get("/categories/").content.decode()
