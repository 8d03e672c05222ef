"""python manage.py demo_load: the seeded demo corpus of ratings and dogfooding reports."""

import io
import random
import string
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db.models import Count, Q
from django.utils import timezone

from demo import corpus as demo_corpus
from demo.corpus import THEMES, VERSIONS
from feedback import services
from feedback.models import FeedbackItem, Source
from feedback.schemas import RatingEvent, ReportIn

TOOLS = {"edit_file", "run_tests", "search", "read_file", "shell"}
ANCHOR = datetime(2026, 11, 30, tzinfo=UTC)


def load(**options) -> str:
    # The corpus of signals alone: the rollouts demo_load adds by default are tests/demo/test_rollout_demo.py's.
    options.setdefault("rollouts", 0)
    out = io.StringIO()
    call_command("demo_load", stdout=out, **options)
    return out.getvalue()


@pytest.fixture(scope="module")
def corpus() -> list[demo_corpus.DemoSignal]:
    return demo_corpus.generate(count=2400, seed=7, anchor=ANCHOR)


# --- Loading ------------------------------------------------------------------


@pytest.mark.django_db
def test_it_loads_a_varied_corpus_of_ratings_and_reports():
    output = load()

    items = FeedbackItem.objects.all()
    assert items.count() == 2400
    assert "2400 signals (seed 7), 2400 new" in output
    assert "15 themes" in output and "coder-2.0" in output and "coder-2.2" in output
    ratings = items.filter(kind="rating")
    reports = items.filter(kind="report")
    assert ratings.count() > 2000 and reports.count() > 150
    assert set(ratings.values_list("rating", flat=True)) == {1, -1}
    assert set(ratings.values_list("model_version", flat=True)) == set(VERSIONS)
    assert set(ratings.values_list("model_name", flat=True)) == {"coder"}
    assert set(ratings.values_list("variant", flat=True)) == {"A", "B"}
    assert set(ratings.values_list("surface", flat=True)) == {"ide", "cli", "web"}
    assert set(reports.values_list("model_version", flat=True)) == set(VERSIONS)
    assert ratings.values("user_ref").distinct().count() > 200
    # Many thumbs-up and some thumbs-down come without a comment.
    for rating in (1, -1):
        assert ratings.filter(rating=rating, comment="").count() > 100
        assert ratings.filter(rating=rating).exclude(comment="").count() > 100
    assert items.exclude(comment="").values("comment").distinct().count() > 700

    product = Source.objects.get(name="coder-backend")
    assert product.kind == Source.Kind.PRODUCT
    assert set(ratings.values_list("source", flat=True)) == {product.id}
    assert set(reports.values_list("source", flat=True)) == {services.dogfood_form_source().id}

    now = timezone.now()
    assert items.filter(occurred_at__gt=now).count() == 0
    assert items.filter(occurred_at__lt=now - timedelta(days=31)).count() == 0
    assert items.filter(occurred_at__gt=now - timedelta(days=7)).exists()
    assert set(items.values_list("status", flat=True)) == {FeedbackItem.Status.RECEIVED}


@pytest.mark.django_db
def test_its_rows_are_what_the_webhook_and_the_report_api_would_store():
    load(count=200)

    for item in FeedbackItem.objects.filter(kind="rating"):
        event = RatingEvent.model_validate(item.received_payload)
        assert event.id == item.external_id
        assert item.comment == (event.comment or "")
        assert item.context == event.context.model_dump(mode="json", exclude_none=True)
        assert item.context["messages"][0]["role"] == "user"
        assert item.context["output"]
        assert {call["name"] for call in item.context["tool_calls"]} <= TOOLS
    for item in FeedbackItem.objects.filter(kind="report"):
        report = ReportIn.model_validate(item.received_payload)
        assert (item.title, item.comment, item.expected) == (report.title, report.what_happened, report.expected)
        assert item.severity in FeedbackItem.Severity.values
        assert item.context["transcript"].startswith("user: ")
        assert item.rating is None


@pytest.mark.django_db
def test_loading_twice_is_a_no_op_the_second_time():
    load(count=300)
    before = dict(FeedbackItem.objects.values_list("external_id", "id"))

    output = load(count=300)

    assert "300 signals (seed 7), 0 new" in output
    assert dict(FeedbackItem.objects.values_list("external_id", "id")) == before


@pytest.mark.django_db
def test_a_load_into_an_empty_database_gives_the_same_ids_and_comments():
    def snapshot():
        return sorted(FeedbackItem.objects.values_list("kind", "external_id", "title", "comment", "context"))

    load(count=300)
    first = snapshot()
    FeedbackItem.objects.all().delete()
    load(count=300)

    assert snapshot() == first


@pytest.mark.django_db
def test_if_empty_does_nothing_when_feedback_exists():
    load(count=5)

    output = load(count=300, if_empty=True)

    assert "nothing loaded" in output
    assert FeedbackItem.objects.count() == 5


@pytest.mark.django_db
def test_if_empty_loads_an_empty_database():
    load(count=50, if_empty=True)
    assert FeedbackItem.objects.count() == 50


@pytest.mark.django_db
def test_the_newest_version_has_the_lowest_thumbs_down_rate():
    load()

    rows = (
        FeedbackItem.objects.filter(kind="rating")
        .values("model_version")
        .annotate(total=Count("id"), down=Count("id", filter=Q(rating=-1)))
    )
    down_rate = {row["model_version"]: row["down"] / row["total"] for row in rows}
    assert down_rate["2.0"] > down_rate["2.1"] > down_rate["2.2"]
    assert down_rate["2.0"] - down_rate["2.2"] > 0.1


# --- The corpus itself ------------------------------------------------------


def test_the_same_seed_gives_the_same_corpus_and_another_seed_a_different_one(corpus):
    again = demo_corpus.generate(count=2400, seed=7, anchor=ANCHOR + timedelta(days=3))
    other = demo_corpus.generate(count=2400, seed=8, anchor=ANCHOR)

    def content(signals):
        return [
            (s.external_id, s.theme, {k: v for k, v in s.payload.items() if k != "occurred_at"}) for s in signals
        ]

    assert content(again) == content(corpus)
    assert not {s.external_id for s in other} & {s.external_id for s in corpus}
    assert [s.payload.get("comment") for s in other] != [s.payload.get("comment") for s in corpus]


def test_a_larger_count_extends_a_smaller_one(corpus):
    assert demo_corpus.generate(count=100, seed=7, anchor=ANCHOR) == corpus[:100]


def test_every_signal_falls_in_the_thirty_days_before_the_anchor(corpus):
    times = [datetime.fromisoformat(s.payload["occurred_at"]) for s in corpus]
    assert min(times) >= ANCHOR - timedelta(days=30)
    assert max(times) < ANCHOR


def test_at_least_twelve_themes_each_have_many_distinct_comments(corpus):
    texts = defaultdict(list)
    for signal in corpus:
        if signal.comment_style == "theme":
            texts[signal.theme].append(signal.payload.get("comment") or signal.payload["what_happened"])

    assert len(THEMES) >= 12 and len(texts) == len(THEMES)
    for theme in THEMES:
        assert len(theme.comments) >= 10, theme.name
        assert len(set(texts[theme.name])) >= 25, theme.name
        # Varied wording: many of the theme's templates are actually used.
        assert len({text[:12].lower() for text in texts[theme.name]}) >= 8, theme.name


def test_there_are_vague_comments_and_praise(corpus):
    styles = Counter((s.payload.get("rating"), s.comment_style) for s in corpus if s.kind == "rating")
    assert styles[("down", "vague")] > 50
    assert styles[("up", "praise")] > 200
    assert styles[("up", "praise_but")] > 20


def test_the_failure_mix_differs_between_versions_and_variants(corpus):
    def share(theme: str, **where) -> float:
        pool = [
            s
            for s in corpus
            if s.theme
            and all((s.version if key == "version" else s.payload.get(key)) == value for key, value in where.items())
        ]
        return sum(s.theme == theme for s in pool) / len(pool)

    # 2.1 fixed hallucinated APIs but regressed into special-casing tests.
    assert share("hallucinated-api", version="2.0") > 3 * share("hallucinated-api", version="2.1")
    assert share("special-cased-test", version="2.1") > 3 * share("special-cased-test", version="2.0")
    # Variant B is wordier.
    assert share("verbose-answer", variant="B") > 2 * share("verbose-answer", variant="A")


def test_every_template_fills_from_the_slots():
    slots = demo_corpus.template_slots(random.Random(1), theme=None, variant="A")
    templates = [
        *demo_corpus.CONSTRAINTS,
        *demo_corpus.FIRST_REPLIES,
        *demo_corpus.PRAISE_COMMENTS,
        *demo_corpus.COMMENT_SUFFIXES,
        *demo_corpus.REPORT_DETAILS,
        *(text for _, arguments, result in demo_corpus.STEPS.values() for text in (*arguments.values(), result)),
        *(text for task in demo_corpus.TASKS for text in (*task.requests, task.change, *task.done)),
        *(
            text
            for theme in THEMES
            for text in (*theme.comments, *theme.titles, *theme.expected, *theme.outputs, *theme.praise_but)
        ),
        *(text for theme in THEMES for text in theme.requests),
    ]
    for template in templates:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name}
        assert names <= slots.keys(), template
        template.format_map(slots)


def test_each_theme_has_weights_for_every_version():
    for theme in THEMES:
        assert set(theme.version_weights) == set(VERSIONS), theme.name
        assert set(theme.severities) <= set(FeedbackItem.Severity.values), theme.name
