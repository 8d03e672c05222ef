"""The held-out promise, with planted exact, near and paraphrased duplicates of eval items."""

import itertools

import numpy as np
import pytest

from exports import holdout, runs
from exports.models import Mode
from feedback import pipeline
from feedback.models import FeedbackItem
from tests.factories import exports as helpers
from tests.factories.exports import (
    at_cosine,
    dataset_make,
    export,
    label_make,
    member_ids,
    unit,
)

pytestmark = pytest.mark.django_db

_requests = itertools.count(1)


def item_make(**fields) -> FeedbackItem:
    """An item with a request of its own: items that share a conversation are held out for that alone."""
    number = next(_requests)
    fields.setdefault("request", f"Request {number}: rename foo to bar in module {number}")
    return helpers.item_make(**fields)


def eval_export(*items, name: str = "eval-set"):
    """An eval version holding exactly these items (selected by their model version)."""
    FeedbackItem.objects.filter(id__in=[item.id for item in items]).update(model_version="eval-only")
    return export(
        dataset_make(name, purpose="eval", formats=("eval_jsonl",), filters={"model_versions": ["eval-only"]})
    )


def train_export(name: str = "train-set", **filters):
    """A train version over the items that are not in the eval set's model version (unless told otherwise)."""
    filters = filters or {"model_versions": ["2.1"]}
    return export(dataset_make(name, purpose="train", formats=("chat_jsonl", "csv"), filters=filters))


def test_normalising_casefolds_strips_punctuation_and_collapses_whitespace():
    assert holdout.text_normalise("  The Agent EDITED\tthe  wrong file!!! ") == "the agent edited the wrong file"
    assert holdout.text_normalise("“Don’t” — stop…") == "dont stop"
    assert holdout.text_key("It's done.") == holdout.text_key("its   DONE")
    assert holdout.text_key("?!...") is None
    assert holdout.text_key("wrong file") != holdout.text_key("wrong files")


def test_an_item_in_an_eval_version_never_appears_in_a_train_export(export_root):
    held = item_make(comment="Edited the wrong file.", vector=unit(1))
    other = item_make(comment="Looped on read_file.", vector=unit(2))
    eval_version = eval_export(held)

    train = train_export(kinds=["rating"])

    assert member_ids(eval_version) == {held.id}
    assert member_ids(train) == {other.id}
    assert train.held_out["reasons"] == {"in_eval_version": 1}


def test_an_exact_duplicate_after_normalising_is_held_out_though_its_vector_differs(export_root):
    eval_item = item_make(comment="The agent edited the wrong file.", vector=unit(1))
    eval_export(eval_item)
    twin = item_make(comment="  the AGENT edited\tthe wrong file!! ", vector=unit(2))
    unrelated = item_make(comment="The agent edited the right file.", vector=unit(3))

    train = train_export()

    assert member_ids(train) == {unrelated.id}
    assert train.held_out["reasons"] == {"duplicate_of_eval_text": 1}
    assert twin.id not in member_ids(train)


def test_a_vector_at_or_above_the_threshold_is_held_out_and_one_just_below_is_kept(export_root, settings):
    settings.HOLDOUT_SIMILARITY = 0.92
    base = unit(7)
    eval_export(item_make(comment="eval text", vector=base))
    near = item_make(comment="near text", vector=at_cosine(base, 0.93))
    far = item_make(comment="far text", vector=at_cosine(base, 0.91))

    train = train_export()

    assert float(unit(at_cosine(base, 0.93)) @ base) == pytest.approx(0.93, abs=1e-5)
    assert member_ids(train) == {far.id}
    assert train.held_out["reasons"] == {"near_duplicate_of_eval": 1}
    assert train.held_out["similarity_threshold"] == 0.92
    assert near.id not in member_ids(train)

    settings.HOLDOUT_SIMILARITY = 0.90
    assert member_ids(train_export("stricter")) == set()


def test_a_paraphrase_embedded_by_the_real_model_is_held_out_and_a_loose_one_is_not(export_root):
    texts = {
        "eval_tests": "It claimed the tests passed but three of them failed",
        "eval_file": "The agent edited the wrong file",
        "paraphrase": "It said the tests passed although three tests failed",
        "loose": "It modified a different file than the one I asked for",
        "unrelated": "The model looped on the same tool call",
    }
    items = {key: item_make(comment=text, context={}) for key, text in texts.items()}
    pipeline.items_embed(item_ids=[item.id for item in items.values()])
    vectors = {
        key: np.frombuffer(
            FeedbackItem.objects.select_related("embedding").get(id=item.id).embedding.vector, np.float32
        )
        for key, item in items.items()
    }
    # What the int8 model really gives these pairs: the rewording is close, the loose paraphrase is not.
    assert float(vectors["paraphrase"] @ vectors["eval_tests"]) > 0.93
    assert float(vectors["loose"] @ vectors["eval_file"]) < 0.7
    eval_export(items["eval_tests"], items["eval_file"])

    train = train_export()

    assert member_ids(train) == {items["loose"].id, items["unrelated"].id}
    assert train.held_out["reasons"] == {"near_duplicate_of_eval": 1}


def test_an_item_a_reviewer_marked_for_eval_is_held_out_of_train(export_root):
    marked = item_make(comment="Marked.")
    label_make(marked, split="eval")
    kept = item_make(comment="Kept.")
    label_make(kept, split="train")

    train = train_export()

    assert member_ids(train) == {kept.id}
    assert train.held_out["reasons"] == {"marked_eval": 1}


def test_an_item_without_a_vector_waits_while_there_are_eval_vectors_to_check_it_against(export_root):
    unchecked = item_make(comment="Not embedded yet.")
    assert member_ids(train_export("before")) == {unchecked.id}  # nothing to check against yet
    eval_export(item_make(comment="Eval.", vector=unit(1)))

    train = train_export("after")

    assert train.item_count == 0 and train.held_out["reasons"] == {"not_embedded": 1}


def test_an_eval_export_deduplicates_itself_keeping_the_lowest_id(export_root):
    base = unit(3)
    first = item_make(comment="Claimed success.", vector=base)
    same_text = item_make(comment="claimed SUCCESS!", vector=unit(4))
    near = item_make(comment="Claimed a success.", vector=at_cosine(base, 0.95))
    distinct = item_make(comment="Deleted unrelated code.", vector=unit(5))
    unembedded = item_make(comment="Not embedded, distinct text.")

    version = eval_export(first, same_text, near, distinct, unembedded)

    assert member_ids(version) == {first.id, distinct.id, unembedded.id}
    assert version.held_out["reasons"] == {"duplicate_text_within_eval": 1, "near_duplicate_within_eval": 1}


def test_an_eval_export_leaves_out_items_already_in_a_train_version(export_root):
    trained = item_make(comment="Trained on.", vector=unit(1))
    train = train_export()
    fresh = item_make(comment="Fresh.", vector=unit(2))

    version = eval_export(trained, fresh)

    assert member_ids(train) == {trained.id}
    assert member_ids(version) == {fresh.id}
    assert version.held_out["reasons"] == {"in_train_version": 1}


def test_an_incremental_eval_export_keeps_out_near_duplicates_of_its_earlier_versions(export_root):
    base = unit(11)
    first = item_make(comment="First.", vector=base, model_version="eval-only")
    dataset = dataset_make(
        "growing-eval", purpose="eval", formats=("eval_jsonl",), filters={"model_versions": ["eval-only"]}
    )
    export(dataset)
    near = item_make(comment="First again.", vector=at_cosine(base, 0.97), model_version="eval-only")
    new = item_make(comment="Second.", vector=unit(12), model_version="eval-only")

    v2 = export(dataset, mode=Mode.INCREMENTAL)

    assert first.id and member_ids(v2) == {new.id}
    assert v2.held_out["reasons"] == {"near_duplicate_within_eval": 1}
    assert near.id not in member_ids(v2)


def test_the_manifest_and_card_say_how_many_items_were_held_out_and_why(export_root):
    base = unit(1)
    eval_item = item_make(comment="Eval case.", vector=base)
    eval_export(eval_item)
    item_make(comment="EVAL case", vector=unit(2))
    item_make(comment="Close to eval.", vector=at_cosine(base, 0.99))
    item_make(comment="Kept.", vector=unit(3))

    train = train_export()
    folder = export_root / "train-set" / "v1"

    held = train.manifest["held_out"]
    assert held["total"] == 2
    assert held["reasons"] == {"duplicate_of_eval_text": 1, "near_duplicate_of_eval": 1}
    assert held["checked_against"] == {"eval_items": 1, "eval_versions": 1}
    card = (folder / "README.md").read_text()
    assert "2 matching items were left out" in card
    assert "1 same text as an eval item (after normalising) (`duplicate_of_eval_text`)" in card


def test_a_train_export_starts_over_when_an_eval_version_lands_while_it_runs(export_root, monkeypatch):
    racing = item_make(comment="Lands in eval mid-export.", vector=unit(1))
    other = item_make(comment="Stays in train.", vector=unit(2))
    dataset = dataset_make("racing-train")
    real_keep = holdout.TrainGuard.keep
    landed = []

    def keep(self, records):
        if not landed:
            landed.append(eval_export(racing))
        return real_keep(self, records)

    monkeypatch.setattr(holdout.TrainGuard, "keep", keep)
    run = runs.export_run_start(dataset=dataset, trigger="command", enqueue=False)
    train = runs.export_run_execute(run_id=run.id)

    assert member_ids(landed[0]) == {racing.id}
    assert member_ids(train) == {other.id}
    assert train.held_out["reasons"] == {"in_eval_version": 1}
