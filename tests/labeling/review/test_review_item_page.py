"""/items/<id>/: the rated conversation, the facts around it, suggestions and the label form."""

import pytest

from feedback import vector_index
from feedback.models import FeedbackItem
from labeling.audit import audit_record
from labeling.models import Assignment, AuditEvent, DoubleReview, Label
from tests.factories.review import category_make, item_make, unit_vector, user_make

pytestmark = pytest.mark.django_db

AGENT_RUN = {
    "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Rename foo to bar in utils.py"},
        {
            "role": "assistant",
            "content": "Here is the change:\n```python\ndef bar():\n    return 1\n```\nDone <b>now</b>.",
        },
    ],
    "output": "All tests pass.",
    "tool_calls": [
        {"name": "edit_file", "arguments": {"path": "main.py", "change": "rename"}, "result": "applied 1 hunk"},
        {"name": "run_tests", "arguments": {"command": "pytest -q"}, "result": "3 failed"},
    ],
    "metadata": {"repo": "acme/api"},
}


@pytest.fixture(autouse=True)
def fresh_vector_index(monkeypatch):
    # The index is process-wide and only reads rows newer than it has seen;
    # test databases roll back, so each test starts from an empty one.
    monkeypatch.setattr(vector_index, "_index", vector_index.VectorIndex())


@pytest.fixture
def logged_in(client, reviewer):
    client.force_login(reviewer)
    return client


def test_it_renders_the_agent_run_as_labelled_turns_with_code_and_collapsed_tool_calls(logged_in, source):
    item = item_make(source, context=AGENT_RUN, comment="It claimed the tests pass", model_version="2.2", variant="B")
    html = logged_in.get(f"/items/{item.id}/").content.decode()
    assert '<header class="turn-role">user</header>' in html
    assert '<header class="turn-role">assistant</header>' in html
    assert '<pre class="code"><code class="language-python" data-language="python">def bar():\n    return 1</code></pre>' in html
    assert "Done &lt;b&gt;now&lt;/b&gt;." in html  # text is escaped, never trusted markup
    assert '<details class="tool-call">' in html and '<span class="tool-name">edit_file</span>' in html
    assert "&quot;path&quot;: &quot;main.py&quot;" in html and "applied 1 hunk" in html and "3 failed" in html
    assert "All tests pass." in html and "It claimed the tests pass" in html
    assert 'title="Thumbs down">▼' in html and "2.2" in html and "<dd>B</dd>" in html and "product" in html
    assert "acme/api" in html  # metadata, collapsed


def test_it_shows_a_reports_title_what_happened_expected_and_transcript(logged_in, source):
    item = item_make(
        source,
        kind=FeedbackItem.Kind.REPORT,
        rating=None,
        title="Claimed tests passed",
        comment="3 tests failed; it said all green",
        expected="Report the failures",
        severity="high",
        context={"transcript": "$ pytest\n3 failed"},
    )
    html = logged_in.get(f"/items/{item.id}/").content.decode()
    assert "Claimed tests passed" in html
    assert "3 tests failed; it said all green" in html and "Report the failures" in html
    assert "$ pytest\n3 failed" in html and "High" in html


def test_it_shows_the_assignment_with_its_confidence_and_who_made_it(logged_in, source, second_reviewer):
    category = category_make("Edits the wrong file")
    item = item_make(source, category=category, confidence=0.734)
    html = logged_in.get(f"/items/{item.id}/").content.decode()
    assert "Edits the wrong file" in html and "model, 0.73" in html
    Assignment.objects.filter(item=item).update(assigned_by="reviewer", reviewer=second_reviewer, confidence=None)
    html = logged_in.get(f"/items/{item.id}/").content.decode()
    assert "set by sam" in html


def test_the_raw_payload_is_shown_to_admins_only(client, source, reviewer, admin_user):
    item = item_make(source, raw_payload={"secret_marker": "raw-42"})
    client.force_login(reviewer)
    assert "raw-42" not in client.get(f"/items/{item.id}/").content.decode()
    assert "raw-42" not in client.post(f"/items/{item.id}/reveal").content.decode()
    client.force_login(admin_user)
    html = client.get(f"/items/{item.id}/").content.decode()
    # Even for admins the payload waits for a reveal, which is audited.
    assert "raw-42" not in html and "Reveal original and raw payload" in html
    html = client.post(f"/items/{item.id}/reveal").content.decode()
    assert "Raw payload (admins)" in html and "raw-42" in html
    assert AuditEvent.objects.filter(item=item, actor=admin_user, action="revealed original").exists()


def test_the_raw_payload_shows_a_context_that_is_stored_only_once(client, source, admin_user):
    item = item_make(
        source,
        context={"messages": [{"role": "user", "content": "Bump ctx-marker-7"}]},
        context_as_received=True,
        raw_payload={"id": "evt_once", "type": "feedback.rating"},
    )
    client.force_login(admin_user)
    html = client.post(f"/items/{item.id}/reveal").content.decode()
    raw = html[html.index("Raw payload (admins)") :]
    assert "evt_once" in raw and "ctx-marker-7" in raw


def test_suggestions_start_with_the_current_category_then_the_nearest_centroids(logged_in, source):
    vector = unit_vector(1)
    near = category_make("Near", centroid=(vector + 0.1 * unit_vector(2)) / 1.005)
    far = category_make("Far", centroid=unit_vector(3), size=100)
    current = category_make("Current", centroid=unit_vector(4))
    category_make("Merged away", status="merged", centroid=vector)
    category_make("Archived", status="archived", centroid=vector)
    item = item_make(source, vector=vector, category=current)
    response = logged_in.get(f"/items/{item.id}/")
    numbers = [(s.number, s.category.name) for s in response.context["suggestions"]]
    assert numbers == [(1, "Current"), (2, "Near"), (3, "Far")]
    html = response.content.decode()
    assert "Merged away" not in html and "Archived" not in html
    assert f'<option value="{current.id}" selected>' in html
    assert near.id and far.id


def test_at_most_nine_categories_are_suggested(logged_in, source):
    for n in range(12):
        category_make(f"Category {n}", size=n)
    item = item_make(source)
    suggestions = logged_in.get(f"/items/{item.id}/").context["suggestions"]
    # Without a vector the biggest categories are suggested.
    assert [s.category.name for s in suggestions] == [f"Category {n}" for n in range(11, 2, -1)]


def test_the_form_offers_the_reward_hacking_tags_and_the_other_fields(logged_in, source):
    item = item_make(source)
    html = logged_in.get(f"/items/{item.id}/").content.decode()
    for tag in ("special-cased a test", "claimed success falsely", "read the answer from history",
                "disabled or skipped tests", "hard-coded expected output", "wrong file", "hallucinated API"):
        assert f'value="{tag}"' in html
    for name in ("verdict", "category", "severity", "other_tags", "hint", "corrected_response", "split"):
        assert f'name="{name}"' in html


def test_the_form_is_filled_with_the_reviewers_own_label(logged_in, source, reviewer):
    item = item_make(source)
    Label.objects.create(item=item, reviewer=reviewer, verdict="failure", tags=["verbose", "slow start"],
                         hint="Ask first.", split="eval")
    html = logged_in.get(f"/items/{item.id}/").content.decode()
    assert 'value="verbose" checked' in html and 'value="slow start"' in html
    assert "Ask first." in html and 'value="eval" id="id_split_1" required checked' in html


def test_the_first_review_stays_hidden_from_the_second_reviewer_of_a_double_review(logged_in, source, second_reviewer):
    category = category_make("First reviewer's pick")
    item = item_make(source, category=category)
    Assignment.objects.filter(item=item).update(assigned_by="reviewer", reviewer=second_reviewer)
    Label.objects.create(item=item, reviewer=second_reviewer, verdict="failure", hint="hidden-hint-xyz")
    audit_record(actor=second_reviewer, action="labelled", item=item, details={"verdict": "failure"})
    audit_record(actor=None, action="assigned", item=item, details={"category": {"name": "by the model"}})
    DoubleReview.objects.create(item=item)
    response = logged_in.get(f"/items/{item.id}/")
    html = response.content.decode()
    assert "hidden-hint-xyz" not in html and "1 other review hidden" in html
    # Neither the category the first reviewer chose, who chose it, a preselection,
    # a "current" mark on a number key nor their history gives the first verdict away.
    header = html.split('id="current-category">', 1)[1].split("</dd>", 1)[0]
    assert "First reviewer's pick" not in header and "hidden until you have labelled it" in header
    assert "set by sam" not in html
    assert response.context["selected_category"] == ""
    assert not any(suggestion.current for suggestion in response.context["suggestions"])
    assert [event.action for event in response.context["audit_events"]] == ["assigned"]
    assert "verdict: failure" not in html

    DoubleReview.objects.all().delete()
    html = logged_in.get(f"/items/{item.id}/").content.decode()
    assert "hidden-hint-xyz" in html and "verdict: failure" in html


def test_it_shows_the_audit_trail(logged_in, source, reviewer):
    item = item_make(source)
    audit_record(actor=reviewer, action="labelled", item=item, details={"verdict": "failure"})
    html = logged_in.get(f"/items/{item.id}/").content.decode()
    assert 'id="audit-trail"' in html and "labelled" in html and "verdict: failure" in html


def test_outside_a_queue_j_and_k_go_to_the_neighbouring_items_of_the_list(logged_in, source):
    older, middle, newer = item_make(source), item_make(source), item_make(source)
    FeedbackItem.objects.filter(id=older.id).update(received_at=middle.received_at.replace(year=2020))
    FeedbackItem.objects.filter(id=newer.id).update(received_at=middle.received_at.replace(year=2030))
    context = logged_in.get(f"/items/{middle.id}/").context
    assert context["previous_url"] == f"/items/{newer.id}/"
    assert context["next_url"] == f"/items/{older.id}/"


def test_the_similar_items_panel_links_each_neighbour_with_its_similarity(logged_in, source):
    vector = unit_vector(5)
    item = item_make(source, vector=vector)
    close = item_make(source, vector=(vector + 0.05 * unit_vector(6)) / 1.0012, comment="close one")
    item_make(source, vector=unit_vector(7), comment="far one")
    response = logged_in.get(f"/items/{item.id}/similar")
    html = response.content.decode()
    assert response.status_code == 200
    assert f'href="/items/{close.id}/"' in html
    assert html.index("close one") < html.index("far one")
    similar = response.context["similar"]
    assert len(similar) == 2 and similar[0].item == close and 99 <= similar[0].percent <= 100
    assert f'href="/items/{item.id}/"' not in html  # never itself
    # The item page loads the panel after it renders, with htmx.
    assert f'hx-get="/items/{item.id}/similar"' in logged_in.get(f"/items/{item.id}/").content.decode()


def page_with_lots_around_it(source, reviewer, labels: int):
    vector = unit_vector(8)
    categories = [category_make(f"Category {n}", centroid=unit_vector(100 + n)) for n in range(15)]
    item = item_make(source, vector=vector, category=categories[0], context=AGENT_RUN)
    for n in range(labels):
        Label.objects.create(item=item, reviewer=user_make(f"reviewer{n}", "reviewer"), verdict="failure",
                             category=categories[n % 15])
        audit_record(actor=reviewer, action="labelled", item=item, details={"n": n})
    for n in range(labels):
        item_make(source, vector=(vector + 0.2 * unit_vector(200 + n)), category=categories[1])
    return item


@pytest.mark.parametrize("labels", [1, 8])
def test_the_item_page_and_its_panel_take_a_bounded_number_of_queries(
    logged_in, source, reviewer, labels, django_assert_max_num_queries
):
    item = page_with_lots_around_it(source, reviewer, labels)
    with django_assert_max_num_queries(10):
        response = logged_in.get(f"/items/{item.id}/")
    assert response.status_code == 200
    # In a queue: one more for the queue's progress (items labelled in it, also those a label moved out).
    with django_assert_max_num_queries(13):
        response = logged_in.get(f"/items/{item.id}/?queue={Assignment.objects.get(item=item).category_id}")
    assert response.status_code == 200
    with django_assert_max_num_queries(8):
        response = logged_in.get(f"/items/{item.id}/similar")
    assert len(response.context["similar"]) == min(labels, 8)
