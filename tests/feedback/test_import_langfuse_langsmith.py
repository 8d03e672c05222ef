"""Langfuse scores joined with traces and LangSmith runs with feedback land in the right fields."""

import json
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import call_command

from feedback.models import FeedbackItem, ImportRun

pytestmark = pytest.mark.django_db


def run_import(path, *args) -> str:
    out = StringIO()
    call_command("import", str(path), *args, "--no-progress", stdout=out)
    return out.getvalue()


def write_jsonl(path, records) -> None:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")


# A trace as Langfuse's API returns it (GET /api/public/traces/{id}), with its scores.
LANGFUSE_TRACE = {
    "id": "trace-1",
    "timestamp": "2026-03-01T09:00:00.000Z",
    "name": "chat-completion",
    "userId": "user-42",
    "sessionId": "session-7",
    "release": "v2026.03",
    "version": "prompt-4",
    "tags": ["prod"],
    "environment": "production",
    "metadata": {"model": "coder-large", "variant": "B"},
    "input": [
        {"role": "system", "content": "You are a coding assistant."},
        {"role": "user", "content": "Rename foo to bar in utils.py"},
    ],
    "output": {"role": "assistant", "content": "I renamed foo in main.py."},
    "scores": [
        {
            "id": "score-down",
            "traceId": "trace-1",
            "name": "user-feedback",
            "value": 0,
            "dataType": "BOOLEAN",
            "source": "API",
            "comment": "Wrong file.",
            "timestamp": "2026-03-01T09:01:00.000Z",
        },
        {
            "id": "score-eval",
            "traceId": "trace-1",
            "name": "hallucination",
            "value": 0.72,
            "dataType": "NUMERIC",
            "source": "EVAL",
            "timestamp": "2026-03-01T09:02:00.000Z",
        },
        {
            "id": "score-cat",
            "traceId": "trace-1",
            "name": "thumbs",
            "value": 1,
            "stringValue": "thumbs_up",
            "dataType": "CATEGORICAL",
            "source": "ANNOTATION",
            "timestamp": "2026-03-01T09:03:00.000Z",
        },
    ],
}

# A score as GET /api/public/scores returns it, joined with the trace it rates.
LANGFUSE_SCORE_WITH_TRACE = {
    "id": "score-2",
    "traceId": "trace-2",
    "name": "user-feedback",
    "value": 1,
    "dataType": "NUMERIC",
    "comment": "Exactly right",
    "timestamp": "2026-03-02T10:00:00Z",
    "trace": {"id": "trace-2", "name": "agent-run", "input": "What does grep -c do?", "output": "It counts matches.",
              "userId": "user-9"},
}


def test_langfuse_traces_with_scores_map_to_rating_events(tmp_path):
    write_jsonl(tmp_path / "langfuse.jsonl", [LANGFUSE_TRACE, LANGFUSE_SCORE_WITH_TRACE])

    out = run_import(tmp_path / "langfuse.jsonl", "--source", "langfuse", "--format", "langfuse")

    assert "stored 3, duplicates 0, refused 1" in out
    down = FeedbackItem.objects.get(external_id="score-down")
    assert down.rating == -1
    assert down.comment == "Wrong file."
    assert down.occurred_at == datetime(2026, 3, 1, 9, 1, tzinfo=UTC)
    assert (down.model_name, down.model_version, down.variant) == ("coder-large", "v2026.03", "B")
    assert (down.surface, down.user_ref) == ("chat-completion", "user-42")
    assert down.context["messages"] == LANGFUSE_TRACE["input"]
    assert down.context["output"] == "I renamed foo in main.py."
    assert down.context["metadata"]["langfuse"] == {
        "trace_id": "trace-1", "session_id": "session-7", "score_name": "user-feedback", "score_source": "API",
        "tags": ["prod"], "environment": "production",
    }
    assert down.received_payload == LANGFUSE_TRACE
    assert FeedbackItem.objects.get(external_id="score-cat").rating == 1
    joined = FeedbackItem.objects.get(external_id="score-2")
    assert joined.rating == 1 and joined.comment == "Exactly right"
    assert joined.context["messages"] == [{"role": "user", "content": "What does grep -c do?"}]
    assert joined.context["output"] == "It counts matches."
    refusal = ImportRun.objects.get().refusals[0]
    assert refusal["line"] == 1 and refusal["id"] == "score-eval"
    assert refusal["field"] == "scores[1].value"
    assert "0.72 is not a thumbs-up" in refusal["reason"]


def test_langfuse_names_pick_the_user_feedback_scores(tmp_path):
    write_jsonl(tmp_path / "langfuse.jsonl", [LANGFUSE_TRACE])

    out = run_import(tmp_path / "langfuse.jsonl", "--source", "langfuse", "--format", "langfuse", "--name",
                     "user-feedback")

    assert "stored 1, duplicates 0, refused 0, skipped 2 (other names)" in out
    assert list(FeedbackItem.objects.values_list("external_id", flat=True)) == ["score-down"]


def test_a_langfuse_re_import_stores_nothing(tmp_path):
    write_jsonl(tmp_path / "langfuse.jsonl", [LANGFUSE_TRACE, LANGFUSE_SCORE_WITH_TRACE])
    run_import(tmp_path / "langfuse.jsonl", "--source", "langfuse", "--format", "langfuse")

    out = run_import(tmp_path / "langfuse.jsonl", "--source", "langfuse", "--format", "langfuse")

    assert "stored 0, duplicates 3, refused 1" in out
    assert FeedbackItem.objects.count() == 3


def test_a_langfuse_score_without_an_id_is_known_by_its_trace_and_name(tmp_path):
    score = {k: v for k, v in LANGFUSE_SCORE_WITH_TRACE.items() if k != "id"}
    write_jsonl(tmp_path / "langfuse.jsonl", [score, score])

    out = run_import(tmp_path / "langfuse.jsonl", "--source", "langfuse", "--format", "langfuse")

    assert "stored 1, duplicates 1" in out
    assert FeedbackItem.objects.get().external_id == "trace-2:user-feedback"


def test_a_langfuse_trace_whose_input_breaks_a_rule_is_refused_naming_the_score(tmp_path):
    trace = {**LANGFUSE_TRACE, "scores": [LANGFUSE_TRACE["scores"][0]], "input": [{"role": "user", "content": "x"}] * 501}
    write_jsonl(tmp_path / "langfuse.jsonl", [trace, LANGFUSE_SCORE_WITH_TRACE])

    run_import(tmp_path / "langfuse.jsonl", "--source", "langfuse", "--format", "langfuse")

    refusal = ImportRun.objects.get().refusals[0]
    assert refusal["line"] == 1 and refusal["field"] == "scores[0]: context.messages"
    assert list(FeedbackItem.objects.values_list("external_id", flat=True)) == ["score-2"]


# A run as LangSmith's API returns it (client.read_run(...).dict()), with its feedback (client.list_feedback).
LANGSMITH_RUN = {
    "id": "run-1",
    "name": "support-bot",
    "run_type": "chain",
    "start_time": "2026-04-01T08:00:00.000000",
    "end_time": "2026-04-01T08:00:03.000000",
    "inputs": {"messages": [{"type": "human", "content": "Where is my order?"}]},
    "outputs": {"output": {"type": "ai", "content": "It shipped yesterday."}},
    "extra": {"metadata": {"ls_model_name": "gpt-4o-mini", "revision_id": "rev-88", "variant": "control",
                           "user_id": "cust-5"}},
    "tags": ["beta"],
    "trace_id": "run-1",
    "session_id": "project-3",
    "feedback": [
        {
            "id": "fb-1",
            "run_id": "run-1",
            "key": "user_score",
            "score": 0,
            "comment": "It did not ship.",
            "correction": {"output": "It ships tomorrow."},
            "created_at": "2026-04-01T08:05:00.000000",
            "feedback_source": {"type": "api"},
        },
        {"id": "fb-2", "run_id": "run-1", "key": "correctness", "score": 0.5, "created_at": "2026-04-01T08:06:00"},
        {"id": "fb-3", "run_id": "run-1", "key": "user_score", "value": "thumbs_up", "created_at": "2026-04-01T09:00:00Z"},
    ],
}

LANGSMITH_FEEDBACK_WITH_RUN = {
    "id": "fb-9",
    "key": "user_score",
    "score": True,
    "created_at": "2026-04-02T12:00:00+00:00",
    "run": {
        "id": "run-9",
        "name": "sql-agent",
        "inputs": {"question": "How many users signed up today?"},
        "outputs": {"answer": "SELECT count(*) FROM users WHERE ..."},
        "extra": {"metadata": {"model_version": "2026-04"}},
    },
}


def test_langsmith_runs_with_feedback_map_to_rating_events(tmp_path):
    write_jsonl(tmp_path / "langsmith.jsonl", [LANGSMITH_RUN, LANGSMITH_FEEDBACK_WITH_RUN])

    out = run_import(tmp_path / "langsmith.jsonl", "--source", "langsmith", "--format", "langsmith")

    assert "stored 3, duplicates 0, refused 1" in out
    down = FeedbackItem.objects.get(external_id="fb-1")
    assert down.rating == -1 and down.comment == "It did not ship."
    # LangSmith writes UTC without an offset.
    assert down.occurred_at == datetime(2026, 4, 1, 8, 5, tzinfo=UTC)
    assert (down.model_name, down.model_version, down.variant) == ("gpt-4o-mini", "rev-88", "control")
    assert (down.surface, down.user_ref) == ("support-bot", "cust-5")
    assert down.context["messages"] == [{"role": "user", "content": "Where is my order?"}]
    assert down.context["output"] == "It shipped yesterday."
    assert down.context["metadata"]["langsmith"] == {
        "run_id": "run-1", "trace_id": "run-1", "project_id": "project-3", "feedback_key": "user_score",
        "correction": {"output": "It ships tomorrow."}, "feedback_source": "api", "tags": ["beta"],
    }
    assert FeedbackItem.objects.get(external_id="fb-3").rating == 1
    sql = FeedbackItem.objects.get(external_id="fb-9")
    assert sql.rating == 1 and sql.model_version == "2026-04" and sql.surface == "sql-agent"
    assert sql.context["messages"] == [{"role": "user", "content": "How many users signed up today?"}]
    assert sql.context["output"] == "SELECT count(*) FROM users WHERE ..."
    refusal = ImportRun.objects.get().refusals[0]
    assert (refusal["line"], refusal["id"], refusal["field"]) == (1, "fb-2", "feedback[1].score")


def test_langsmith_serialised_langchain_messages_become_turns(tmp_path):
    run = {
        **LANGSMITH_RUN,
        "inputs": {"messages": [[
            {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "SystemMessage"],
             "kwargs": {"content": "Be brief.", "type": "system"}},
            {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"],
             "kwargs": {"content": "Hi", "type": "human"}},
        ]]},
        "outputs": {"generations": [[{"text": "Hello!", "type": "ChatGeneration"}]]},
        "feedback": [LANGSMITH_RUN["feedback"][0]],
    }
    write_jsonl(tmp_path / "langsmith.jsonl", [run])

    run_import(tmp_path / "langsmith.jsonl", "--source", "langsmith", "--format", "langsmith")

    item = FeedbackItem.objects.get()
    assert item.context["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert item.context["output"] == "Hello!"


def test_a_langsmith_line_without_feedback_is_refused_and_the_next_stored(tmp_path):
    bare = {k: v for k, v in LANGSMITH_RUN.items() if k != "feedback"}
    bare["feedback"] = []
    write_jsonl(tmp_path / "langsmith.jsonl", [bare, LANGSMITH_FEEDBACK_WITH_RUN])

    out = run_import(tmp_path / "langsmith.jsonl", "--source", "langsmith", "--format", "langsmith")

    assert "stored 1, duplicates 0, refused 1" in out
    assert ImportRun.objects.get().refusals[0] == {"line": 1, "id": None, "field": "feedback",
                                                     "reason": "holds no feedback"}
