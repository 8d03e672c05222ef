"""The demo's datasets: one eval and one train set over the demo corpus, each exported once.

`demo_load --process` calls demo_datasets_export(), so `make run` opens with
exports to look at. The eval set is exported first: the train export then
holds out its items and anything nearly identical to them.
"""

from exports import services
from exports.models import Dataset, Trigger
from exports.schemas import DatasetIn

DEMO_DATASETS = (
    {
        "name": "coder-failures-eval",
        "purpose": "eval",
        "description": "Dogfooding reports as eval cases: the transcript, the failure category and what should "
        "have happened. Deduplicated: near-identical reports count once.",
        "formats": ["eval_jsonl", "csv"],
        "filters": {"kinds": ["report"]},
    },
    {
        "name": "coder-sft-train",
        "purpose": "train",
        "description": "Answers users rated thumbs-up, as chat examples for supervised fine-tuning.",
        "formats": ["chat_jsonl", "csv", "parquet"],
        "filters": {"rating": "up"},
    },
)


def demo_datasets_export() -> list[str]:
    """Define the demo datasets that do not exist yet and export those without a version; lines to print."""
    lines = []
    for spec in DEMO_DATASETS:
        dataset = Dataset.objects.filter(name=spec["name"]).first()
        if dataset is None:
            dataset = services.dataset_create(spec=DatasetIn.model_validate(spec))
        if dataset.versions.exists():
            continue
        try:
            run = services.export_run_start(dataset=dataset, trigger=Trigger.DEMO, made_by="demo_load", enqueue=False)
        except services.ExportAlreadyRunning:
            lines.append(f"demo_load: an export of {dataset.name} is running already")
            continue
        version = services.export_run_execute(run_id=run.id)
        held = version.held_out.get("total", 0)
        lines.append(
            f"demo_load: dataset {dataset.name} ({dataset.purpose}) v{version.number}: "
            f"{version.item_count} items, {held} held out -> {services.version_folder(version=version)}"
        )
    return lines
