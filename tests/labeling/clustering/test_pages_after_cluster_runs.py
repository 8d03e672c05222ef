"""Every reviewer page answers after real cluster runs, with reviewer decisions between them.

A cluster run writes ``{"items": {"before": .., "after": ..}}`` on a category's
history. Django's template lookup tries the key "items" before the dict method,
so a template looping over ``details.items`` crashed every category page after
a nightly run. These tests walk the pages the way a reviewer and an admin
would after two runs over the demo corpus (embedded by the real model), and
pin the ``pairs`` filter that the templates now use for stored dicts.
"""

import io

import pytest
from django.core.management import call_command
from django.template.loader import render_to_string
from django.utils import timezone

from feedback import pipeline
from feedback.models import FeedbackItem
from labeling.clustering.services import items_assign
from labeling.models import Assignment, AuditEvent, Category, ClusterRun, Label
from labeling.templatetags.audit import pairs
from tests.factories.clustering import category_of, run_clustering
from tests.factories.exports import dataset_make, export, item_make

pytestmark = pytest.mark.django_db

FIRST_LOAD, SECOND_LOAD = 300, 450  # demo signals (seed 7): the second load adds 150 new ones


def demo_load_and_embed(count: int) -> None:
    """The first `count` demo signals (ratings and reports), embedded by the real model and assigned as the
    worker would (the same steps as ``demo_load --process``, without its cluster run and exports)."""
    call_command("demo_load", count=count, stdout=io.StringIO())
    waiting = list(
        FeedbackItem.objects.filter(status=FeedbackItem.Status.RECEIVED).order_by("id").values_list("id", flat=True)
    )
    items_assign(item_ids=pipeline.items_embed(item_ids=waiting))


def label_form(**overrides) -> dict:
    data = {
        "verdict": "failure", "category": "", "severity": "high", "tags": ["wrong file"], "other_tags": "",
        "hint": "Check which file the user named before editing.", "corrected_response": "", "split": "train",
    }
    return data | overrides


def item_ids_in(category: Category) -> list[int]:
    return list(Assignment.objects.filter(category=category).order_by("item_id").values_list("item_id", flat=True))


def pages() -> list[str]:
    return [
        "/",
        "/categories/",
        "/categories/?status=all",
        *[f"/categories/{pk}/" for pk in Category.objects.order_by("id").values_list("id", flat=True)],
        "/runs/",
        *[f"/runs/{pk}/" for pk in ClusterRun.objects.order_by("id").values_list("id", flat=True)],
        *[f"/items/{pk}/" for pk in FeedbackItem.objects.order_by("id").values_list("id", flat=True)],
    ]


@pytest.mark.slow  # two real cluster runs over 450 embedded signals, then about 1,000 pages
def test_every_category_run_and_item_page_answers_after_two_runs_with_reviewer_actions_between(reviewer, admin):
    demo_load_and_embed(FIRST_LOAD)
    first = run_clustering()
    categories = list(Category.objects.filter(size__gt=0).order_by("-size", "id"))
    assert len(categories) >= 7, [(c.name, c.size) for c in categories]
    renamed, confirmed, absorbed, target, split_from, labelled_in, moved_from = categories[:7]

    # The reviewer's decisions, through the pages.
    responses = {
        "rename": reviewer.post(f"/categories/{renamed.id}/edit",
                                {"name": "Reviewer's name for the biggest category", "description": "Written by rita"}),
        "confirm": reviewer.post(f"/categories/{confirmed.id}/confirm"),
        "merge": reviewer.post(f"/categories/{absorbed.id}/merge", {"target": target.id}),
        "split": reviewer.post(f"/categories/{split_from.id}/split",
                               {"name": "Split off by rita", "items": item_ids_in(split_from)[:2]}),
    }
    labelled, moved = item_ids_in(labelled_in)[0], item_ids_in(moved_from)[0]
    responses["label"] = reviewer.post(f"/items/{labelled}/", label_form(category=str(labelled_in.id)))
    responses["move"] = reviewer.post(f"/items/{moved}/", label_form(category=str(confirmed.id)))
    assert {action: r.status_code for action, r in responses.items()} == dict.fromkeys(responses, 302)
    split_off = Category.objects.get(name="Split off by rita")
    assert Label.objects.filter(item_id__in=[labelled, moved]).count() == 2
    assert category_of(moved) == confirmed

    # More signals arrive; the next run resizes and renames categories on their history.
    demo_load_and_embed(SECOND_LOAD)
    second = run_clustering()
    assert second.counts["matched"] >= 1, second.counts
    resized = list(AuditEvent.objects.filter(action=f"resized by cluster run #{second.id}").select_related("category"))
    assert resized, "the second run resized no category: the walk below would not cover the crash"
    # The reviewer's decisions survive the run.
    renamed.refresh_from_db()
    absorbed.refresh_from_db()
    assert renamed.name == "Reviewer's name for the biggest category"
    assert absorbed.status == Category.Status.MERGED and absorbed.merged_into_id == target.id
    assert category_of(moved) == confirmed

    # Every page, as a reviewer and as an admin; a crash is a 500 in the list, not the end of the walk.
    urls = pages()
    assert len(urls) > SECOND_LOAD
    statuses = []
    for who, client in (("reviewer", reviewer), ("admin", admin)):
        client.raise_request_exception = False
        statuses += [(who, url, client.get(url).status_code) for url in urls]
        client.raise_request_exception = True
    assert [row for row in statuses if row[2] != 200] == []

    # A category's page shows the run's change beside the reviewer's.
    for event in resized:
        history = reviewer.get(f"/categories/{event.category_id}/").content.decode().split('id="audit-trail"')[1]
        change = event.details["items"]
        assert f"resized by cluster run #{second.id}" in history
        assert f"items: {change['before']} → {change['after']}" in history
    for category, action in [(renamed, "renamed"), (confirmed, "confirmed"), (absorbed, "merged"),
                             (split_from, "split")]:
        history = admin.get(f"/categories/{category.id}/").content.decode().split('id="audit-trail"')[1]
        assert f"rita</strong> {action}" in history, (category.name, action)
    run_page = reviewer.get(f"/runs/{first.id}/").content.decode()
    assert "dict_items" not in run_page and "merge_threshold" in run_page
    assert reviewer.get(f"/categories/{split_off.id}/").status_code == 200


def test_a_run_resize_on_the_history_reads_as_before_and_after():
    event = AuditEvent(action="resized by cluster run #7", details={"items": {"before": 33, "after": 26}},
                       created_at=timezone.now())

    html = render_to_string("_partials/audit_trail.html", {"events": [event]})

    assert "<strong>system</strong> resized by cluster run #7" in html
    assert "items: 33 → 26" in html


def test_pairs_gives_a_dicts_pairs_even_for_a_key_named_items_and_nothing_for_other_values():
    assert pairs({"items": {"before": 33, "after": 26}, "name": "x"}) == [
        ("items", {"before": 33, "after": 26}), ("name", "x")
    ]
    assert pairs(None) == [] and pairs("items") == [] and pairs([("items", 1)]) == []


def test_a_run_page_lists_a_parameter_named_items(reviewer):
    run = ClusterRun.objects.create(
        trigger=ClusterRun.Trigger.COMMAND, status=ClusterRun.Status.DONE, active=None, progress=1.0,
        params={"items": 5000, "merge_threshold": 0.045}, counts={"items": 0, "clusters": 0},
    )
    response = reviewer.get(f"/runs/{run.id}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<tr><th>items</th><td class="mono">5000</td></tr>' in html
    assert '<tr><th>merge_threshold</th><td class="mono">0.045</td></tr>' in html


def test_a_dataset_version_page_lists_a_category_named_items(reviewer, export_root):
    category = Category.objects.create(name="items", status=Category.Status.CONFIRMED, size=1)
    Assignment.objects.create(item=item_make(), category=category)
    dataset = dataset_make("named-items")
    version = export(dataset)
    assert version.counts["by_category"] == {"items": 1}

    for url in [f"/datasets/{dataset.id}/", f"/datasets/{dataset.id}/v{version.number}/"]:
        response = reviewer.get(url)
        assert response.status_code == 200, url
    assert '<tr><td>items</td><td class="num">1</td></tr>' in response.content.decode()
