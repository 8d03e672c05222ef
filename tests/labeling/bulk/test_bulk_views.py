"""The selection bar on the search, category and area pages, and the bulk history's undo."""

import pytest

from labeling.models import Area, Assignment, AuditEvent, BulkAction, Category, Label
from tests.factories import client_for
from tests.factories.review import category_make, item_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def setting(source):
    old = category_make("Edits the wrong file")
    new = category_make("Claims the tests passed", status=Category.Status.CONFIRMED)
    items = [item_make(source, category=old, comment=f"wrong file {i}") for i in range(4)]
    for category in (old, new):
        category.size = Assignment.objects.filter(category=category).count()
        category.save()
    return old, new, items


def placements(items):
    return sorted(Assignment.objects.filter(item__in=items).values_list("item_id", "category_id", "assigned_by"))


def post_move(client, chosen, new, **extra):
    data = {"action": "move", "category": str(new.id), "items": [str(i.id) for i in chosen], "next": "/search/"}
    data.update(extra)
    return client.post("/bulk/", data)


def test_every_list_page_shows_the_selection_bar_and_the_history(setting, reviewer, source):
    old, new, items = setting
    area = Area.objects.create(name="Files")
    Assignment.objects.filter(item=items[0]).update(area=area, category=None)
    client = client_for(reviewer)
    for url in ("/search/", f"/categories/{old.id}/", f"/areas/{area.id}/"):
        page = client.get(url).content.decode()
        assert 'id="bulk-bar"' in page and 'id="bulk-history"' in page, url
        assert f'name="items" value="{items[0].id if "areas" in url else items[1].id}"' in page, url


def test_a_move_from_the_search_page_lands_back_with_a_message_and_an_undo_button(setting, reviewer):
    old, new, items = setting
    client = client_for(reviewer)
    response = post_move(client, items[:2], new, scope="search", next="/search/?q=wrong")
    assert response.status_code == 302 and response["Location"] == "/search/?q=wrong"
    page = client.get("/search/?q=wrong").content.decode()
    assert "Done: moved 2 items to “Claims the tests passed”" in page
    action = BulkAction.objects.get()
    assert f'id="bulk-undo-{action.id}"' in page
    assert Assignment.objects.filter(category=new).count() == 2

    undone = client.post(f"/bulk/{action.id}/undo", {"next": "/search/?q=wrong"})
    assert undone.status_code == 302
    assert Assignment.objects.filter(category=new).count() == 0
    assert "Undone: moved 2 items" in client.get("/search/").content.decode()


def test_select_all_matching_on_a_category_page_moves_what_the_filter_lists(setting, reviewer):
    old, new, items = setting
    Assignment.objects.filter(item=items[0]).update(assigned_by=Assignment.By.REVIEWER)
    client = client_for(reviewer)
    response = client.post(
        "/bulk/",
        {
            "action": "move", "category": str(new.id), "all_matching": "1", "scope": "category",
            "scope_id": str(old.id), "query": "assigned_by=model&page=2", "next": f"/categories/{old.id}/",
        },
    )
    assert response.status_code == 302
    assert Assignment.objects.filter(category=new).count() == 3
    assert Assignment.objects.get(item=items[0]).category_id == old.id
    # The action is listed on the page it came from and on the target's page.
    action = BulkAction.objects.get()
    assert f'id="bulk-undo-{action.id}"' in client.get(f"/categories/{old.id}/").content.decode()
    assert f'id="bulk-undo-{action.id}"' in client.get(f"/categories/{new.id}/").content.decode()


@pytest.mark.parametrize(
    ("data", "status", "message"),
    [
        ({"items": []}, 422, "the selection is empty: tick some items, or select all matching"),
        ({"items": ["12abc"]}, 422, "the selection holds something that is not an item"),
        ({"items": ["99999999"]}, 404, "1 of the selected items do not exist: 99999999"),
        ({"category": ""}, 422, "choose the category to move the items to"),
        ({"category": "99999999"}, 404, "that category does not exist"),
        ({"action": "explode"}, 422, "action must be one of move, verdict, tags_add"),
        ({"all_matching": "1", "scope": "search", "query": "date_from=2026-13-40"}, 422, "filter date_from"),
        ({"all_matching": "1", "scope": "search", "query": "q=nothing+like+this+at+all"}, 422, "no items match"),
        ({"all_matching": "1", "scope": "area", "scope_id": "99999"}, 404, "the area of the filter does not exist"),
        ({"action": "tags_add", "tags": ""}, 422, "name at least one tag"),
        ({"action": "tags_add", "tags": "x" * 51}, 422, "a tag has at most 50 characters"),
        ({"action": "verdict", "verdict": "maybe"}, 422, "verdict must be one of"),
    ],
)
def test_a_refused_bulk_action_says_why_and_changes_nothing(setting, reviewer, data, status, message):
    old, new, items = setting
    before = placements(items)
    client = client_for(reviewer)
    response = post_move(client, items, new, **data)
    assert response.status_code == status
    assert message in response.content.decode()
    assert "Nothing was changed" in response.content.decode()
    assert placements(items) == before
    assert not BulkAction.objects.exists() and not AuditEvent.objects.exists()


def test_a_merged_target_is_a_conflict(setting, reviewer):
    old, new, items = setting
    Category.objects.filter(id=new.id).update(status=Category.Status.MERGED)
    before = placements(items)
    response = post_move(client_for(reviewer), items, new)
    assert response.status_code == 409
    assert "is merged; move items into a proposed or confirmed category" in response.content.decode()
    assert placements(items) == before


def test_duplicates_in_the_selection_count_once(setting, reviewer):
    old, new, items = setting
    response = post_move(client_for(reviewer), [items[0], items[0], items[1]], new)
    assert response.status_code == 302
    assert BulkAction.objects.get().item_count == 2


def test_a_bulk_action_needs_the_reviewer_role_and_a_post(setting, no_role_user, reviewer):
    old, new, items = setting
    before = placements(items)
    assert post_move(client_for(no_role_user), items, new).status_code == 403
    from django.test import Client

    anonymous = post_move(Client(), items, new)
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    assert client_for(reviewer).get("/bulk/").status_code == 405
    assert placements(items) == before


def test_someone_else_may_not_undo_it(setting, reviewer, second_reviewer):
    old, new, items = setting
    post_move(client_for(reviewer), items, new)
    action = BulkAction.objects.get()
    response = client_for(second_reviewer).post(f"/bulk/{action.id}/undo", {"next": "/search/"})
    assert response.status_code == 403
    assert "only whoever made a bulk action, or an admin, may undo it" in response.content.decode()
    assert Assignment.objects.filter(category=new).count() == 4


def test_an_outside_next_address_is_not_followed(setting, reviewer):
    old, new, items = setting
    response = post_move(client_for(reviewer), items[:1], new, next="https://evil.example/")
    assert response.status_code == 302 and response["Location"] == "/search/"


def test_a_label_action_from_the_page_writes_the_reviewers_labels(setting, reviewer):
    old, new, items = setting
    client = client_for(reviewer)
    response = client.post(
        "/bulk/", {"action": "verdict", "verdict": "spam", "items": [str(i.id) for i in items], "next": "/search/"}
    )
    assert response.status_code == 302
    assert sorted(Label.objects.values_list("verdict", flat=True)) == ["spam"] * 4
    response = client.post(
        "/bulk/",
        {"action": "tags_add", "tags": "verbose, too slow", "items": [str(items[0].id)], "next": "/search/"},
    )
    assert response.status_code == 302
    assert Label.objects.get(item=items[0]).tags == ["verbose", "too slow"]


def test_the_merge_of_a_category_is_undone_from_the_targets_page(setting, reviewer):
    old, new, items = setting
    client = client_for(reviewer)
    response = client.post(f"/categories/{old.id}/merge", {"target": str(new.id)})
    assert response.status_code == 302
    page = client.get(f"/categories/{new.id}/").content.decode()
    action = BulkAction.objects.get(kind="merge")
    assert f'id="bulk-undo-{action.id}"' in page
    client.post(f"/bulk/{action.id}/undo", {"next": f"/categories/{new.id}/"})
    old.refresh_from_db()
    assert old.status == Category.Status.PROPOSED and old.size == 4
    assert Assignment.objects.filter(category=old).count() == 4
