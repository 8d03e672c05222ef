"""The demo's datasets: one eval and one train set over the demo corpus, each exported once.

`demo_load --process` calls demo_datasets_export(), so `make run` opens with
exports to look at. The eval set is exported first: the train export then
holds out its items and anything nearly identical to them. Between them the
two use every format, and a demo reviewer's labels (hints, corrected
responses) give the hint, coaching and preference files rows to show.
"""

from django.contrib.auth import get_user_model

from exports import datasets, runs, writing
from exports.models import Dataset, Trigger
from exports.schemas import DatasetIn
from feedback.models import FeedbackItem
from labeling.models import Label
from labeling.review.services import label_save

DEMO_REVIEWER = "demo-reviewer"
# Enough labelled runs for every labelled format to show a few rows, few enough to leave the queue to the user.
DEMO_REVIEWS = 12
# What a failed run's last test step says when the answer claimed success anyway.
FAILED_RESULT_STARTS = ("FAILED ", "build failed:", "error: timed out")

DEMO_DATASETS = (
    {
        "name": "coder-failures-eval",
        "purpose": "eval",
        "description": "Dogfooding reports as eval cases: the transcript, the failure category and what should "
        "have happened. Deduplicated: near-identical reports count once.",
        "formats": ["eval_jsonl", "inspect_jsonl", "csv"],
        "filters": {"kinds": ["report"]},
    },
    {
        "name": "coder-sft-train",
        "purpose": "train",
        "description": "Rated agent runs, each format taking only what it can train on: chat rows end in a "
        "thumbs-up answer or a reviewer's correction (never in a thumbs-down answer), KTO rows label every rated "
        "answer, preference pairs put corrections against failed answers, coaching rows add the reviewer's hint.",
        "formats": [
            "chat_jsonl",
            "preference_jsonl",
            "kto_jsonl",
            "hints_jsonl",
            "coaching_jsonl",
            "csv",
            "parquet",
        ],
        "filters": {"kinds": ["rating"]},
    },
)


def _failed_test_result(context: dict) -> str | None:
    """The last test step's result when it shows a failure, else None."""
    calls = [call for call in context.get("tool_calls") or () if isinstance(call, dict)]
    tests = [call for call in calls if call.get("name") == "run_tests" and isinstance(call.get("result"), str)]
    if tests and tests[-1]["result"].startswith(FAILED_RESULT_STARTS):
        return tests[-1]["result"].splitlines()[0]
    return None


def demo_reviews_add() -> int:
    """Label a few thumbs-down runs whose tests failed, as a reviewer would; once only. Returns how many.

    Each gets a coaching hint quoting the failing step; every other one also a
    corrected response, so coaching rows show both with and without a target.
    """
    reviewer, _ = get_user_model().objects.get_or_create(username=DEMO_REVIEWER)
    if Label.objects.filter(reviewer=reviewer).exists():
        return 0
    added = 0
    downs = FeedbackItem.objects.thumbs_down().filter(kind=FeedbackItem.Kind.RATING).order_by("id")
    for item in downs.only("id", "context").iterator(chunk_size=500):
        failed = _failed_test_result(item.context if isinstance(item.context, dict) else {})
        if failed is None:
            continue
        label_save(
            item=item,
            reviewer=reviewer,
            verdict=Label.Verdict.FAILURE,
            tags=["claimed success falsely"],
            hint=f'Read the last test run before answering: it says "{failed}". Report that, not success.',
            corrected_response=(
                f'The last test run did not pass ("{failed}"), so the change is not done. Next I will find out '
                "why and run the tests again."
                if added % 2 == 0
                else ""
            ),
        )
        added += 1
        if added >= DEMO_REVIEWS:
            break
    return added


def demo_datasets_export() -> list[str]:
    """Define the demo datasets that do not exist yet and export those without a version; lines to print."""
    lines = []
    # Before the exports, so the labelled formats have rows; the labels show on the review pages as the demo reviewer's.
    demo_reviews_add()
    for spec in DEMO_DATASETS:
        dataset = Dataset.objects.filter(name=spec["name"]).first()
        if dataset is None:
            dataset = datasets.dataset_create(spec=DatasetIn.model_validate(spec))
        if dataset.versions.exists():
            continue
        try:
            run = runs.export_run_start(dataset=dataset, trigger=Trigger.DEMO, made_by="demo_load", enqueue=False)
        except runs.ExportAlreadyRunning:
            lines.append(f"demo_load: an export of {dataset.name} is running already")
            continue
        version = runs.export_run_execute(run_id=run.id)
        held = version.held_out.get("total", 0)
        lines.append(
            f"demo_load: dataset {dataset.name} ({dataset.purpose}) v{version.number}: "
            f"{version.item_count} items, {held} held out -> {writing.version_folder(version=version)}"
        )
    return lines
