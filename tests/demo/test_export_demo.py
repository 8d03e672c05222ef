"""demo_load --process defines one eval and one train dataset over the demo data and exports each once."""

import io

import pytest
from django.core.management import call_command

from demo.datasets import demo_datasets_export
from exports.models import Dataset, DatasetVersion

pytestmark = pytest.mark.django_db



def test_demo_load_with_process_exports_an_eval_and_a_train_dataset(export_root):
    out = io.StringIO()
    call_command("demo_load", count=300, process=True, stdout=out)

    lines = out.getvalue().splitlines()
    evals, train = Dataset.objects.get(purpose="eval"), Dataset.objects.get(purpose="train")
    assert (evals.name, train.name) == ("coder-failures-eval", "coder-sft-train")
    assert lines[-2].startswith("demo_load: dataset coder-failures-eval (eval) v1: ")
    assert lines[-1].startswith("demo_load: dataset coder-sft-train (train) v1: ")
    assert lines[-1].endswith(str(export_root / "coder-sft-train" / "v1"))
    eval_version, train_version = evals.versions.get(), train.versions.get()
    assert eval_version.item_count > 10 and train_version.item_count > 100
    assert eval_version.made_by == "demo_load" and eval_version.trigger == "demo"
    assert not set(eval_version.members.values_list("item_id", flat=True)) & set(
        train_version.members.values_list("item_id", flat=True)
    )
    for name in ("eval.jsonl", "items.csv", "manifest.json", "README.md"):
        assert (export_root / "coder-failures-eval" / "v1" / name).exists()


def test_running_it_again_defines_and_exports_nothing_new(export_root):
    call_command("demo_load", count=120, stdout=io.StringIO())
    assert len(demo_datasets_export()) == 2

    assert demo_datasets_export() == []
    assert Dataset.objects.count() == 2 and DatasetVersion.objects.count() == 2
