"""The text that represents a signal: evidence when the comment says little, repository names masked,
and a versioned recipe that re-embeds what an older recipe made."""

import io
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.utils import timezone

from exports.holdout import text_key
from feedback import pipeline
from feedback.models import FeedbackItem
from feedback.text import EMBED_RECIPE, embed_text, embeddable_text, is_vague, mask_identifiers
from labeling.models import Assignment, Category
from labeling.clustering.services import clusterable_failures
from tests.factories import source_make


def item(comment="", context=None, title="", expected=""):
    return SimpleNamespace(title=title, comment=comment, expected=expected, context=context or {})


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("It edited src/api/client.ts instead of utils.py.", "It edited file instead of file."),
        ("parse_config lives in config/loader.py", "name lives in file"),
        ("calls os.path.joinx() and getUserById on UserService", "calls name and name on name"),
        ("commit 3f9a2b1c reverted 4 files", "commit hash reverted N files"),
        ("see https://ci.acme.dev/run/123).", "see link)."),
        ("On 12/03 at 10:45 it took 35s", "On N at N it took N"),
        ("Edited C:\\repo\\main.py and the Dockerfile", "Edited file and the file"),
        ("Wrote to /health and ~/notes", "Wrote to file and file"),
        ("repo acme/api", "repo file"),
    ],
)
def test_it_masks_paths_identifiers_hashes_urls_and_numbers(text, masked):
    assert mask_identifiers(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "TypeError: cannot read property of undefined",  # an error type says what failed
        "It was slow and/or wrong, yes/no?",
        "The iPhone app crashes",
        "It printed [SECRET:github_token] and [EMAIL]",  # scrubber placeholders stay for the checks
    ],
)
def test_it_keeps_words_error_types_and_scrubber_placeholders(text):
    assert mask_identifiers(text) == text


@pytest.mark.parametrize("comment", ["no", "nope", "meh", "didn't work", "worse than before", "👎", "??", "bad output"])
def test_a_vague_comment_is_recognised(comment):
    assert is_vague(comment)


@pytest.mark.parametrize("comment", ["It edited main.py instead of utils.py", "claims tests pass when they fail"])
def test_a_comment_that_names_a_failure_is_not_vague(comment):
    assert not is_vague(comment)


RUN = {
    "messages": [{"role": "user", "content": "Fix the flaky test in billing"}, {"role": "assistant", "content": "ok"}],
    "output": "I ran the suite and everything is green now.",
    "tool_calls": [
        {"name": "read_file", "arguments": {"path": "a.py"}, "result": "120 lines"},
        {"name": "run_tests", "arguments": {"command": "pytest"}, "result": "collected 40\nerror: timed out after 10 minutes"},
    ],
    "metadata": {"stopped": "step limit reached", "timed_out": True},
}


def test_a_vague_comment_falls_back_to_the_evidence_of_its_run():
    text = embeddable_text(item("nope", RUN))
    assert text.splitlines() == [
        "nope",
        "error: timed out after 10 minutes",
        "step limit reached",
        "timed out",
        "I ran the suite and everything is green now.",
    ]


def test_the_request_speaks_only_for_a_run_that_left_no_other_trace():
    assert embeddable_text(item("", {"messages": RUN["messages"]})) == "Fix the flaky test in billing"


def test_a_comment_that_says_what_went_wrong_stands_alone():
    assert embeddable_text(item("It claimed the suite passed but 3 tests failed", RUN)) == (
        "It claimed the suite passed but 3 tests failed"
    )


def test_the_evidence_reads_tool_messages_and_ignores_odd_shapes():
    context = {"messages": [{"role": "tool", "content": "Traceback: KeyError 'x'"}, "not a message", 7], "output": 12}
    assert embeddable_text(item("", context)) == "Traceback: KeyError 'x'"
    assert embeddable_text(item("", {"tool_calls": "nope", "messages": None, "metadata": []})) == ""


def test_two_reports_of_one_failure_in_different_repositories_get_one_text_and_one_held_out_key():
    first = embed_text(item("It edited src/billing/tasks.py instead of notifications_service.py"))
    second = embed_text(item("It edited web/app/routes.ts instead of userController.ts"))
    assert first == second == "It edited file instead of file"
    assert text_key(first) == text_key(second)


@pytest.mark.django_db
def test_reembed_brings_items_of_an_older_recipe_up_to_date_and_keeps_their_category():
    source, _ = source_make()
    old = FeedbackItem.objects.create(
        source=source, external_id="old", kind="rating", rating=-1, comment="It edited main.py instead of utils.py",
        occurred_at=timezone.now(), receipt_id="00000000-0000-0000-0000-000000000000",
    )
    pipeline.items_embed(item_ids=[old.id])
    category = Category.objects.create(name="Edits the wrong file")
    Assignment.objects.create(item=old, category=category)
    FeedbackItem.objects.filter(id=old.id).update(
        embed_recipe=1, embed_text="It edited main.py instead of utils.py", status=FeedbackItem.Status.ASSIGNED
    )
    assert not clusterable_failures().filter(id=old.id).exists()  # a run never mixes two recipes

    out = io.StringIO()
    call_command("reembed", stdout=out)

    old.refresh_from_db()
    assert old.embed_recipe == EMBED_RECIPE and old.embed_text == "It edited file instead of file"
    assert old.status == FeedbackItem.Status.ASSIGNED and old.assignment.category == category
    assert clusterable_failures().filter(id=old.id).exists()
    assert "1 items re-embedded" in out.getvalue()
    call_command("reembed", stdout=out)  # nothing left: a second call changes nothing
    assert "0 items re-embedded" in out.getvalue()
