"""Search by meaning on the search page: a text or "more like this", ranked by vector, under every filter."""

import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from feedback import custom_patterns, embedder, pipeline, vector_index
from feedback.models import Embedding, FeedbackItem
from labeling.search import meaning
from labeling.review import services as review_services
from labeling.models import Assignment, Category, DoubleReview, Label
from tests.factories import client_for, source_make, user_make
from tests.factories.search import OTHER_COMPLAINTS as OTHERS
from tests.factories.search import SUITE_COMPLAINTS as SUITE

pytestmark = pytest.mark.django_db

# The wording of the first complaint only: words find that one, meaning finds all three.
SUITE_QUERY = "claimed the suite passed"


@pytest.fixture
def reviewer():
    return user_make("rev", "reviewer")


@pytest.fixture
def client(reviewer):
    return client_for(reviewer)


@pytest.fixture
def source():
    return source_make()[0]


def embedded(source, comment, **fields) -> FeedbackItem:
    """An item taken through the real embedding step (recipe, scrubbing, the model)."""
    defaults = dict(kind="rating", rating=-1, occurred_at=timezone.now(), receipt_id=uuid.uuid4())
    item = FeedbackItem.objects.create(
        source=source, external_id=uuid.uuid4().hex, comment=comment, **(defaults | fields)
    )
    assert pipeline.items_embed(item_ids=[item.id]) == [item.id]
    item.refresh_from_db()
    return item


@pytest.fixture
def corpus(source):
    return {text: embedded(source, text) for text in SUITE + OTHERS}


def vector_item(source, vector, n, **fields) -> FeedbackItem:
    """An item with a given unit vector (synthetic: for ranking and paging at sizes the model would make slow)."""
    vector = np.asarray(vector, dtype=np.float32)
    vector /= np.linalg.norm(vector)
    embedding = Embedding.objects.create(content_hash=f"{n:064x}", model_name="test", vector=vector.tobytes())
    defaults = dict(kind="rating", rating=-1, occurred_at=timezone.now(), receipt_id=uuid.uuid4())
    return FeedbackItem.objects.create(
        source=source, external_id=f"v{n}", comment=f"signal {n}", embedding=embedding,
        status=FeedbackItem.Status.EMBEDDED, **(defaults | fields),
    )


def listed(response) -> list[FeedbackItem]:
    assert response.status_code == 200, response.content.decode()[:2000]
    return list(response.context["page"])


def errors(response) -> str:
    body = response.content.decode()
    return body[body.index('role="alert"') : body.index("</div>", body.index('role="alert"'))]


# --- Ranking ------------------------------------------------------------------------


def test_a_text_lists_the_items_nearest_in_meaning_first_with_their_similarity(client, corpus):
    response = client.get("/search/", {"mode": "meaning", "q": SUITE_QUERY})
    rows = listed(response)

    assert {row.comment for row in rows[:3]} == set(SUITE)
    assert len(rows) == len(SUITE + OTHERS)
    body = response.content.decode()
    assert "Similarity" in body and f"{rows[0].similarity_percent}%" in body
    assert "nearest signals by meaning, most similar first" in body
    # Word search stays, and finds only the complaint worded like the query.
    assert [row.comment for row in listed(client.get("/search/", {"q": SUITE_QUERY}))] == [SUITE[0]]


def test_results_are_ordered_by_the_cosine_of_the_query_and_item_vectors(client, corpus):
    rows = listed(client.get("/search/", {"mode": "meaning", "q": SUITE_QUERY}))

    query = embedder.embed_texts([meaning.query_text(SUITE_QUERY)])[0]
    cosines = {
        item.id: float(np.frombuffer(item.embedding.vector, dtype=np.float32) @ query)
        for item in FeedbackItem.objects.select_related("embedding")
    }
    assert [row.id for row in rows] == sorted(cosines, key=lambda item_id: -cosines[item_id])
    for row in rows:
        assert row.similarity == pytest.approx(cosines[row.id], abs=1e-5)
        assert row.similarity_percent == round(100 * cosines[row.id])


def test_the_query_text_is_scrubbed_and_masked_like_item_texts():
    prepared = meaning.query_text("  mail  alice@example.com about\tsrc/runner/suite.py  failing ")
    assert "alice@example.com" not in prepared and "suite.py" not in prepared
    assert prepared == "mail [EMAIL] about file failing"


# --- Filters ------------------------------------------------------------------------


def test_every_filter_combines_with_a_search_by_meaning(client, source):
    other, _ = source_make("other")
    category = Category.objects.create(name="Claims success")
    week_ago = (timezone.now() - timedelta(days=7)).date().isoformat()
    fits = dict(model_version="2.2", variant="B")
    wanted = [embedded(source, text, **fits) for text in SUITE[:2]]
    far_but_fits = embedded(source, "The answer took minutes to arrive", **fits)
    outside = [
        embedded(source, SUITE[2], model_version="2.1", variant="B"),  # another version
        embedded(other, SUITE[2], **fits),  # another source
        embedded(source, SUITE[2], rating=1, **fits),  # thumbs up
        embedded(source, SUITE[2], occurred_at=timezone.now() - timedelta(days=40), **fits),  # too old
        embedded(source, SUITE[2], **fits),  # in no category
    ]
    for item in [*wanted, far_but_fits]:
        Assignment.objects.create(item=item, category=category)
    query = {
        "mode": "meaning", "q": SUITE_QUERY, "source": source.slug, "rating": "down", "model_version": "2.2",
        "variant": "B", "category": str(category.id), "date_from": week_ago,
    }

    rows = listed(client.get("/search/", query))

    assert len(rows) == 3
    assert {row.id for row in rows[:2]} == {item.id for item in wanted} and rows[2].id == far_but_fits.id
    assert not {item.id for item in outside} & {row.id for row in rows}
    unlabelled = listed(client.get("/search/", query | {"review": "none"}))
    assert [row.id for row in unlabelled] == [row.id for row in rows]
    review_services.label_save(item=wanted[0], reviewer=user_make("other-rev", "reviewer"), verdict=Label.Verdict.FAILURE)
    assert wanted[0].id not in [row.id for row in listed(client.get("/search/", query | {"review": "none"}))]
    assert [row.id for row in listed(client.get("/search/", query | {"review": "failure"}))] == [wanted[0].id]


def test_a_selective_filter_still_finds_its_nearest_items_beyond_the_first_cuts(client, source, monkeypatch):
    # Small cuts, so that the filtered items lie beyond both: only scoring the
    # filtered items' vectors finds them. The answer must equal the exact one.
    monkeypatch.setattr(meaning, "ROUNDS", (3, 6))
    rng = np.random.default_rng(7)
    centre = rng.standard_normal(384)
    near = [vector_item(source, centre + 0.1 * rng.standard_normal(384), n) for n in range(40)]
    category = Category.objects.create(name="Far away")
    far = [vector_item(source, rng.standard_normal(384), 100 + n) for n in range(5)]
    for item in far:
        Assignment.objects.create(item=item, category=category)

    rows = listed(client.get("/search/", {"like": near[0].id, "category": str(category.id)}))

    start = np.frombuffer(near[0].embedding.vector, dtype=np.float32)
    exact = sorted(far, key=lambda item: -float(np.frombuffer(item.embedding.vector, dtype=np.float32) @ start))
    assert [row.id for row in rows] == [item.id for item in exact]


def test_the_cuts_and_the_scoring_of_filtered_items_give_the_same_answer(source, monkeypatch):
    rng = np.random.default_rng(3)
    items = [vector_item(source, rng.standard_normal(384), n, rating=(-1 if n % 4 else 1)) for n in range(120)]
    filters = meaning.SearchFilters(rating="down")
    vector = np.frombuffer(items[0].embedding.vector, dtype=np.float32)

    by_cuts = meaning.items_nearest(filters=filters, vector=vector, limit=30).neighbours
    monkeypatch.setattr(meaning, "ROUNDS", (2, 4))
    by_scoring = meaning.items_nearest(filters=filters, vector=vector, limit=30).neighbours

    assert [n.item_id for n in by_cuts] == [n.item_id for n in by_scoring]
    assert len(by_cuts) == 30 and all(FeedbackItem.objects.get(id=n.item_id).rating == -1 for n in by_cuts)
    similarities = [n.similarity for n in by_cuts]
    assert similarities == sorted(similarities, reverse=True)


def test_results_page_through_from_nearer_to_farther(client, source):
    rng = np.random.default_rng(5)
    centre = rng.standard_normal(384)
    items = [vector_item(source, centre + (0.05 + n / 30) * rng.standard_normal(384), n) for n in range(75)]

    first = client.get("/search/", {"like": items[0].id})
    second = client.get("/search/", {"like": items[0].id, "page": 2})

    assert first.context["page"].paginator.count == 74
    first_rows, second_rows = listed(first), listed(second)
    assert len(first_rows) == 50 and len(second_rows) == 24
    assert first_rows[-1].similarity >= second_rows[0].similarity
    assert b'rel="next">Farther' in first.content and b'rel="prev">' in second.content
    assert f"like={items[0].id}".encode() in first.content


# --- More like this -----------------------------------------------------------------


def test_more_like_this_lists_the_neighbours_of_an_item_without_the_item_itself(client, source, corpus):
    start = corpus[SUITE[0]]
    twin = embedded(source, SUITE[0])  # the same words: the same vector

    response = client.get("/search/", {"like": start.id})
    rows = listed(response)

    assert start.id not in [row.id for row in rows]
    assert rows[0].id == twin.id and rows[0].similarity_percent == 100
    assert {row.comment for row in rows[1:3]} == set(SUITE[1:])
    body = response.content.decode()
    assert f'More like <a href="/items/{start.id}/">#{start.id}</a>' in body
    assert 'name="like" value="%d"' % start.id in body  # kept when a filter is added
    assert 'value="meaning" style="min-width:0" checked' in body


def test_the_item_page_offers_more_like_this(client, corpus):
    item = corpus[SUITE[0]]
    panel = client.get(f"/items/{item.id}/similar")
    assert panel.status_code == 200
    assert f'href="/search/?like={item.id}"' in panel.content.decode()


def test_more_like_this_of_an_item_without_a_vector_says_why_nothing_is_listed(client, source, corpus):
    waiting = FeedbackItem.objects.create(
        source=source, external_id="w", kind="rating", rating=-1, occurred_at=timezone.now(), receipt_id=uuid.uuid4()
    )
    response = client.get("/search/", {"like": waiting.id, "rating": "down"})
    assert response.status_code == 200
    assert f"Item #{waiting.id} has no vector yet" in response.content.decode()
    assert response.context["page"] is None
    assert b'<option value="down" selected>' in response.content


@pytest.mark.parametrize(
    "like, message",
    [
        ("abc", "Pick an item by its number, as on its page (#123)."),
        ("-4", "Pick an item by its number, as on its page (#123)."),
        ("9" * 30, "Pick an item by its number, as on its page (#123)."),
        ("999999", "There is no item #999999."),
    ],
)
def test_more_like_an_item_that_does_not_exist_is_refused_with_a_message(client, corpus, like, message):
    response = client.get("/search/", {"like": like, "rating": "down"})
    assert response.status_code == 422
    assert message in errors(response)
    assert response.context["page"] is None
    assert b'<option value="down" selected>' in response.content  # the filters are kept


# --- Odd and oversize input ---------------------------------------------------------


@pytest.mark.parametrize(
    "query, message",
    [
        ({"mode": "meaning"}, "Type what went wrong to search by meaning"),
        ({"mode": "meaning", "q": " \t\n  "}, "Type what went wrong to search by meaning"),
        ({"mode": "meaning", "q": "x" * 100_000}, "at most 1,000 characters (this one has 100,000)"),
        ({"q": "x" * 100_000}, "Search words can be at most 200 characters (these have 100,000)"),
        ({"mode": "sideways", "q": "tests"}, "Select a valid choice."),
    ],
)
def test_an_empty_oversize_or_odd_query_is_refused_with_a_message_and_the_page_answers(client, corpus, query, message):
    response = client.get("/search/", query | {"rating": "down", "variant": "B"})
    assert response.status_code == 422
    assert message in errors(response)
    assert response.context["page"] is None
    body = response.content.decode()
    assert '<option value="down" selected>' in body and 'name="mode"' in body


def test_a_query_holding_nul_is_refused_before_the_search_runs(client, corpus):
    response = client.get("/search/", {"mode": "meaning", "q": "tests\x00passed", "rating": "down"})
    assert response.status_code == 400
    assert response.content.decode() == "the URL must not contain a NUL character (%00)"


def test_a_query_of_only_emoji_or_other_scripts_is_answered(client, corpus):
    for text in ("🤖🔥✅", "テストが通ったと嘘をついた", "a"):
        rows = listed(client.get("/search/", {"mode": "meaning", "q": text}))
        assert len(rows) == len(corpus)
        similarities = [row.similarity for row in rows]
        assert similarities == sorted(similarities, reverse=True)


def test_a_query_at_the_length_limit_is_answered(client, corpus):
    text = ("the tests were reported green but never ran " * 40)[: meaning.QUERY_MAX_CHARS]
    rows = listed(client.get("/search/", {"mode": "meaning", "q": text}))
    assert {row.comment for row in rows[:3]} == set(SUITE)


def test_a_search_by_meaning_with_no_vectors_yet_lists_nothing(client, source):
    FeedbackItem.objects.create(
        source=source, external_id="w", kind="rating", rating=-1, occurred_at=timezone.now(), receipt_id=uuid.uuid4()
    )
    response = client.get("/search/", {"mode": "meaning", "q": SUITE_QUERY})
    assert listed(response) == [] and "Nothing matches these filters." in response.content.decode()


def queries_of(client, query) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        assert client.get("/search/", query).status_code == 200
    return len(captured)


@pytest.mark.parametrize("count", [20, 120])
def test_a_search_by_meaning_reads_one_query_more_than_a_word_search_however_many_items(
    client, source, count, monkeypatch
):
    rng = np.random.default_rng(1)
    category = Category.objects.create(name="c")
    items = [vector_item(source, rng.standard_normal(384), n) for n in range(count)]
    for item in items:
        Assignment.objects.create(item=item, category=category)
    filters = {"category": str(category.id), "rating": "down"}
    client.get("/search/", {"like": items[0].id})  # loads the index
    # Neither the index nor the sources' scrub patterns are read again in between on a slow machine.
    monkeypatch.setattr(vector_index, "REFRESH_SECONDS", 3600.0)
    monkeypatch.setattr(custom_patterns, "MAX_AGE_SECONDS", 3600.0)
    words = queries_of(client, filters)  # a count and the page's rows
    # The item it starts from, the filter check of the nearest, the page's rows.
    assert queries_of(client, filters | {"like": items[0].id}) <= words + 1
    assert queries_of(client, filters | {"like": items[0].id, "page": 2}) <= words + 1
    # A text reads no item to start from.
    assert queries_of(client, filters | {"mode": "meaning", "q": "signal"}) <= words


# --- Who may search, and what a blind second review hides ---------------------------


def test_anonymous_visitors_are_sent_to_login_and_staff_without_a_review_role_are_refused(corpus):
    from django.test import Client

    anonymous = Client().get("/search/", {"mode": "meaning", "q": SUITE_QUERY})
    assert anonymous.status_code == 302 and "/login/" in anonymous.url
    staff = client_for(user_make("staff"))
    response = staff.get("/search/", {"like": corpus[SUITE[0]].id})
    assert response.status_code == 403


@pytest.fixture
def blind(source, corpus):
    """A suite complaint in double review, labelled by a first reviewer into a category of their choosing."""
    admin = user_make("ada", "admin")
    item = corpus[SUITE[1]]
    chosen = Category.objects.create(name="First reviewer's choice", status=Category.Status.CONFIRMED)
    Assignment.objects.create(item=item, category=Category.objects.create(name="Model's guess"), confidence=0.9)
    first = user_make("fred", "reviewer")
    review_services.label_save(item=item, reviewer=first, verdict=Label.Verdict.FAILURE, category=chosen)
    DoubleReview.objects.create(item=item, requested_by=admin)
    return {"item": item, "chosen": chosen, "first": first, "admin": admin}


def test_a_second_reviewer_sees_a_blind_item_by_meaning_without_its_label(client, blind, corpus):
    response = client.get("/search/", {"like": corpus[SUITE[0]].id})
    row = next(row for row in listed(response) if row.id == blind["item"].id)
    assert row.labels_hidden and row.category_hidden and row.verdict is None
    body = response.content.decode()
    results = body[body.index("<tbody>") : body.index("</tbody>")]
    assert "First reviewer&#x27;s choice" not in results and "verdict-failure" not in results


@pytest.mark.parametrize("query", [{"review": "failure"}, {"review": "none"}, {"category": "chosen"}, {"category": "none"}])
def test_no_review_or_category_filter_by_meaning_tells_a_second_reviewer_the_first_label(client, blind, corpus, query):
    query = {key: str(blind[value].id) if value in blind else value for key, value in query.items()}
    rows = listed(client.get("/search/", {"like": corpus[SUITE[0]].id} | query))
    assert blind["item"].id not in [row.id for row in rows]


def test_admins_and_the_first_reviewer_see_the_label_and_filter_on_it_by_meaning(blind, corpus):
    for user in (blind["admin"], blind["first"]):
        client = client_for(user)
        like = {"like": corpus[SUITE[0]].id}
        row = next(row for row in listed(client.get("/search/", like)) if row.id == blind["item"].id)
        assert row.verdict == Label.Verdict.FAILURE and not row.labels_hidden
        found = listed(client.get("/search/", like | {"category": str(blind["chosen"].id)}))
        assert [row.id for row in found] == [blind["item"].id]
