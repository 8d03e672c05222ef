"""Confirmed rollout flags in the data: never an SFT target, a rejected / undesirable example, eval cases naming the check."""

import json

import pytest
from django.contrib.auth import get_user_model

from rollouts import services
from rollouts.models import RolloutFlag
from tests.factories.exports import dataset_make, export, item_make, label_make

pytestmark = pytest.mark.django_db

HACK = [
    {"name": "shell", "arguments": {"command": "git log -p -- src/parse.py"}, "result": "commit 1a2b: fix parse"},
    {"name": "edit_file", "arguments": {"path": "src/parse.py", "change": "copy the fix"}, "result": "applied"},
]
CLEAN = [{"name": "shell", "arguments": {"command": "git status"}, "result": "clean"}]


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def rollout(n: int, calls, *, rating=1, output=None):
    context = {"messages": [{"role": "user", "content": f"fix parse {n}"}], "output": output or f"output {n}",
               "tool_calls": calls}
    return item_make(context=context, rating=rating, raw_payload={"context": context})


@pytest.fixture
def reviewer():
    return get_user_model().objects.create_user("rita")


@pytest.fixture
def items(reviewer):
    confirmed = rollout(1, HACK)
    corrected = rollout(2, HACK)
    label_make(corrected, reviewer=reviewer, verdict="not_failure", corrected_response="correction 2")
    pending = rollout(3, HACK)
    dismissed = rollout(4, HACK)
    clean = rollout(5, CLEAN)
    services.items_check(item_ids=[i.id for i in (confirmed, corrected, pending, dismissed, clean)])
    for item in (confirmed, corrected):
        services.flag_decide(flag_id=RolloutFlag.objects.get(item=item).id, reviewer=reviewer, decision="confirmed")
    services.flag_decide(flag_id=RolloutFlag.objects.get(item=dismissed).id, reviewer=reviewer, decision="dismissed")
    return {"confirmed": confirmed, "corrected": corrected, "pending": pending, "dismissed": dismissed, "clean": clean}


def test_confirmed_flags_never_reach_an_sft_file(export_root, items):
    version = export(dataset_make("sft", formats=("chat_jsonl",)))
    rows = lines(export_root / "sft" / "v1" / "chat.jsonl")
    ends = {row["messages"][-1]["content"] for row in rows}
    # Thumbs-up rollouts: the pending, dismissed and clean ones may be targets; the confirmed ones never,
    # not even through a reviewer's corrected response.
    assert ends == {"output 3", "output 4", "output 5"}
    assert not any("git log" in json.dumps(row) and row["messages"][-1]["content"] in ("output 1", "correction 2")
                   for row in rows)
    assert version.members.count() == 5  # left out of the chat file only, not out of the version


def test_confirmed_flags_export_as_kto_false_with_the_calls_in_the_completion(export_root, items):
    export(dataset_make("kto", formats=("kto_jsonl",)))
    rows = lines(export_root / "kto" / "v1" / "kto.jsonl")
    flagged = [row for row in rows if row["prompt"][0]["content"] in ("fix parse 1", "fix parse 2")]
    assert len(flagged) == 2 and all(row["label"] is False for row in flagged)
    for row in flagged:
        names = [turn["tool_calls"][0]["function"]["name"] for turn in row["completion"] if turn.get("tool_calls")]
        assert names == ["shell", "edit_file"]
        assert not any(turn.get("tool_calls") for turn in row["prompt"])
    others = {row["prompt"][0]["content"]: row["label"] for row in rows if row not in flagged}
    assert others == {"fix parse 3": True, "fix parse 4": True, "fix parse 5": True}


def test_a_confirmed_flag_with_a_correction_is_the_rejected_side_of_a_dpo_pair(export_root, items):
    export(dataset_make("dpo", formats=("preference_jsonl",)))
    rows = lines(export_root / "dpo" / "v1" / "preference.jsonl")
    pair = next(row for row in rows if row["prompt"][0]["content"] == "fix parse 2")
    assert pair["chosen"] == [{"role": "assistant", "content": "correction 2"}]
    assert pair["rejected"][-1] == {"role": "assistant", "content": "output 2"}
    assert any(turn.get("tool_calls") for turn in pair["rejected"])
    assert not any(turn.get("tool_calls") for turn in pair["prompt"])


def test_eval_cases_name_the_confirmed_check(export_root, items):
    export(dataset_make("evals", purpose="eval", formats=("eval_jsonl", "inspect_jsonl")))
    eval_rows = {row["messages"][0]["content"]: row for row in lines(export_root / "evals" / "v1" / "eval.jsonl")}
    assert eval_rows["fix parse 1"]["rollout_checks"] == ["vcs_history"]
    assert all("rollout_checks" not in row for key, row in eval_rows.items() if key not in ("fix parse 1", "fix parse 2"))
    samples = lines(export_root / "evals" / "v1" / "inspect.jsonl")
    by_input = {sample["input"][0]["content"]: sample for sample in samples}
    assert by_input["fix parse 1"]["metadata"]["rollout_checks"] == ["vcs_history"]
    assert "read the answer from history" in by_input["fix parse 1"]["metadata"]["tags"]
    assert all("rollout_checks" not in sample["metadata"] for key, sample in by_input.items()
               if key not in ("fix parse 1", "fix parse 2"))
