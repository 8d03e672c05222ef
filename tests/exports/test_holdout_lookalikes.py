"""The held-out promise against disguised copies: look-alike letters, full-width forms, invisible
characters, an eval item's conversation under another comment, and eval items without a vector.

Each case runs a real eval export and a real train export and reads the train files back;
the real embedding model speaks wherever meaning decides.
"""

import csv
import itertools
import json

import numpy as np
import pytest

from exports import holdout, runs
from exports.models import DatasetVersion, ExportRun, Trigger
from feedback import pipeline
from feedback.models import FeedbackItem
from tests.factories import exports as helpers
from tests.factories.exports import dataset_make, embed_plant, export, member_ids, unit

pytestmark = pytest.mark.django_db

EVAL_COMMENT = "It claimed the tests passed but three of them failed"
# A rewording the real model puts at cosine 0.95 to EVAL_COMMENT.
PARAPHRASE = "It said the tests passed although three tests failed"
UNRELATED = "The model looped on the same tool call"
# Feedback written in Russian: Cyrillic letters, many of them look-alikes, but not a disguise.
RUSSIAN = "Модель зациклилась на одном и том же вызове инструмента"
# Accents, curly quotes and an ellipsis: ordinary writing, not a disguise.
FRENCH = "L’agent a modifié le mauvais fichier…"

# Cyrillic letters that look like the Latin ones they replace.
CYRILLIC_LOOKALIKES = str.maketrans("aceopxyiABCEHKMOPTX", "асеорхуіАВСЕНКМОРТХ")
INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff\u00ad"

_requests = itertools.count(1)


def cyrillic_lookalikes(text: str) -> str:
    return text.translate(CYRILLIC_LOOKALIKES)


def full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else "\u3000" if c == " " else c for c in text)


def zero_width_injected(text: str) -> str:
    # An invisible character after every letter, cycling through the kinds there are.
    marks = itertools.cycle(INVISIBLE)
    return "".join(c + next(marks) if c.isalpha() else c for c in text)


def item_make(*, comment: str, messages: list[dict] | None = None, **fields) -> FeedbackItem:
    """A rated item with a conversation of its own unless `messages` are given, so that
    only the rule a test is about can hold it out."""
    number = next(_requests)
    messages = messages or [{"role": "user", "content": f"Request {number}: tidy module {number} of the billing app"}]
    context = {"messages": messages, "output": fields.pop("output", f"Tidied module {number}.")}
    return helpers.item_make(comment=comment, context=context, **fields)


def embed(*items: FeedbackItem) -> None:
    """Embed with the real model, as the pipeline does."""
    pipeline.items_embed(item_ids=[item.id for item in items])


def vector_of(item: FeedbackItem) -> np.ndarray:
    item = FeedbackItem.objects.select_related("embedding").get(id=item.id)
    return np.frombuffer(item.embedding.vector, np.float32)


def eval_export(*items: FeedbackItem) -> DatasetVersion:
    FeedbackItem.objects.filter(id__in=[item.id for item in items]).update(model_version="eval-only")
    return export(
        dataset_make("eval-set", purpose="eval", formats=("eval_jsonl",), filters={"model_versions": ["eval-only"]})
    )


def train_export(name: str = "train-set") -> DatasetVersion:
    return export(dataset_make(name, formats=("chat_jsonl", "csv"), filters={"model_versions": ["2.1"]}))


def exported_comments(export_root, name: str = "train-set") -> dict[int, str]:
    with open(export_root / name / "v1" / "items.csv", encoding="utf-8", newline="") as handle:
        return {int(row["id"]): row["comment"] for row in csv.DictReader(handle)}


def chat_rows(export_root, name: str = "train-set") -> list[list[dict]]:
    lines = (export_root / name / "v1" / "chat.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["messages"] for line in lines]


# --- Normalising ----------------------------------------------------------------------


def test_normalising_folds_lookalikes_full_width_forms_and_invisible_characters():
    plain = holdout.text_normalise(EVAL_COMMENT)

    assert plain == "it claimed the tests passed but three of them failed"
    for disguise in (cyrillic_lookalikes, full_width, zero_width_injected):
        assert disguise(EVAL_COMMENT) != EVAL_COMMENT
        assert holdout.text_normalise(disguise(EVAL_COMMENT)) == plain, disguise.__name__
    # Greek look-alikes, a variation selector, a no-break space, a ligature.
    assert holdout.text_normalise("Τhe ﬁle wαs\u00a0οpen\ufe0f") == "the file was open"
    # An upper-case look-alike of "I" reads as "I", not as the "l" of Unicode's prototype.
    assert holdout.text_normalise("Іt failed") == holdout.text_normalise("It failed") == "it failed"
    assert holdout.text_key(cyrillic_lookalikes(EVAL_COMMENT)) == holdout.text_key(EVAL_COMMENT)
    # Texts that differ stay different.
    assert holdout.text_key(EVAL_COMMENT) != holdout.text_key(PARAPHRASE)
    # ASCII is never folded: "I" and "l" stay apart where no other script is involved.
    assert holdout.text_key("wrong file") != holdout.text_key("wrong fiIe")


def test_a_text_in_another_script_is_not_taken_for_a_disguise():
    for disguise in (cyrillic_lookalikes, full_width, zero_width_injected):
        assert holdout.is_disguised(disguise(EVAL_COMMENT)), disguise.__name__
    assert not holdout.is_disguised(RUSSIAN)
    assert not holdout.is_disguised(FRENCH)
    assert not holdout.is_disguised(EVAL_COMMENT)
    # Russian keeps the letters that imitate nothing: its key is its own.
    assert "д" in holdout.text_normalise(RUSSIAN) and "ц" in holdout.text_normalise(RUSSIAN)
    assert holdout.text_key(RUSSIAN) != holdout.text_key("Модель вызвала не тот инструмент")


def test_the_plain_reading_of_a_disguised_item_is_what_the_text_recipe_makes_of_the_plain_words():
    plain = helpers.item_make(comment="It edited utils.py instead of api.py")
    renamed = helpers.item_make(comment="It edited utils.рy instead of аpi.py")  # Cyrillic р, а
    # Letter by letter, the comment looks vague to the recipe, which then adds the run's output.
    spaced = helpers.item_make(comment=zero_width_injected("It edited utils.py instead of api.py"))

    expected = pipeline.embed_text_for(plain)
    assert expected == "It edited file instead of file"
    for disguised in (renamed, spaced):
        assert holdout.text_key(pipeline.embed_text_for(disguised)) != holdout.text_key(expected)
        assert holdout.undisguised_text(disguised) == expected
    assert holdout.undisguised_text(plain) == expected


def test_conversation_keys_ignore_roles_and_turn_breaks_and_list_every_opening():
    eval_turns = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Add a column"}]
    moved = [{"role": "user", "content": "you are a  coding agent. add a сolumn!"}]
    continued = eval_turns + [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Now index it"}]

    whole = holdout.conversation_keys(eval_turns)[-1]

    assert holdout.conversation_keys(moved) == [whole]
    assert whole in holdout.conversation_keys(continued)
    assert len(holdout.conversation_keys(continued)) == 4
    assert whole not in holdout.conversation_keys(eval_turns[:1] + [{"role": "user", "content": "Drop a column"}])
    assert holdout.conversation_keys([{"role": "user", "content": "  ?! "}]) == []


# --- Disguised copies of an eval comment ----------------------------------------------


@pytest.mark.parametrize("disguise", [cyrillic_lookalikes, full_width, zero_width_injected])
def test_a_disguised_copy_of_an_eval_comment_stays_out_of_a_train_export(export_root, disguise):
    eval_item = item_make(comment=EVAL_COMMENT)
    # Thumbs-up, so their answers may end a chat row: only the held-out rule keeps the copy out.
    copy = item_make(comment=disguise(EVAL_COMMENT), rating=1)
    unrelated = item_make(comment=UNRELATED, rating=1)
    russian = item_make(comment=RUSSIAN)
    french = item_make(comment=FRENCH)
    embed(eval_item, copy, unrelated, russian, french)
    eval_export(eval_item)

    train = train_export()

    comments = exported_comments(export_root)
    assert comments == {unrelated.id: UNRELATED, russian.id: RUSSIAN, french.id: FRENCH}
    assert copy.id not in member_ids(train)
    assert train.held_out["reasons"] == {"duplicate_of_eval_text": 1}
    chat = json.dumps(chat_rows(export_root), ensure_ascii=False)
    assert copy.context["messages"][0]["content"] not in chat
    assert unrelated.context["messages"][0]["content"] in chat


def test_lookalike_and_full_width_copies_are_far_from_the_original_by_meaning():
    """Why the text rule must fold them: the model alone puts them far apart."""
    texts = [EVAL_COMMENT, cyrillic_lookalikes(EVAL_COMMENT), full_width(EVAL_COMMENT)]
    items = [item_make(comment=text) for text in texts]
    embed(*items)
    original, lookalike, wide = (vector_of(item) for item in items)

    assert float(original @ lookalike) < 0.5
    assert float(original @ wide) < 0.5


def test_a_reworded_lookalike_copy_is_caught_by_the_meaning_of_its_plain_reading(export_root):
    eval_item = item_make(comment=EVAL_COMMENT)
    reworded = item_make(comment=cyrillic_lookalikes(PARAPHRASE))
    unrelated = item_make(comment=UNRELATED)
    russian = item_make(comment=RUSSIAN)
    embed(eval_item, reworded, unrelated, russian)
    assert float(vector_of(reworded) @ vector_of(eval_item)) < 0.5
    eval_export(eval_item)

    train = train_export()

    assert exported_comments(export_root) == {unrelated.id: UNRELATED, russian.id: RUSSIAN}
    assert train.held_out["reasons"] == {"near_duplicate_of_eval": 1}


def test_a_lookalike_eval_item_keeps_out_a_plain_rewording_of_it(export_root):
    eval_item = item_make(comment=cyrillic_lookalikes(EVAL_COMMENT))
    reworded = item_make(comment=PARAPHRASE)
    unrelated = item_make(comment=UNRELATED)
    embed(eval_item, reworded, unrelated)
    eval_export(eval_item)

    train = train_export()

    assert exported_comments(export_root) == {unrelated.id: UNRELATED}
    assert train.held_out["reasons"] == {"near_duplicate_of_eval": 1}


# --- The eval item's conversation under other comments ----------------------------------


def test_items_carrying_an_eval_items_conversation_stay_out_of_a_train_export(export_root):
    system = {"role": "system", "content": "You are a coding agent working in the acme repository."}
    request = "Write a migration that adds a nullable email column to the users table"
    eval_messages = [system, {"role": "user", "content": request}]
    eval_item = item_make(comment="It dropped the index it was asked to keep", messages=eval_messages)
    same = item_make(comment="", rating=1, messages=eval_messages, output="Added the migration 0042.")
    restyled = item_make(
        comment="",
        rating=1,
        messages=[{"role": "user", "content": f"{system['content']}\n\n{cyrillic_lookalikes(request.upper())}!"}],
        output="Here is the migration you asked for.",
    )
    continued = item_make(
        comment="Great",
        rating=1,
        messages=eval_messages + [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks!"}],
        output="You are welcome.",
    )
    # Shares the system prompt, asks for something else: a conversation of its own.
    other_request = "Write a migration that renames the users table to accounts"
    sibling = item_make(
        comment="", rating=1, messages=[system, {"role": "user", "content": other_request}], output="Renamed it."
    )
    unrelated = item_make(comment="", rating=1, output="Replaced the print calls with logging.")
    embed(eval_item, same, restyled, continued, sibling, unrelated)
    eval_export(eval_item)

    train = train_export()

    assert member_ids(train) == {sibling.id, unrelated.id}
    assert train.held_out["reasons"] == {"same_conversation_as_eval": 3}
    rows = chat_rows(export_root)
    assert len(rows) == 2
    chat = json.dumps(rows, ensure_ascii=False)
    assert request not in chat and holdout.text_normalise(request) not in holdout.text_normalise(chat)
    assert other_request in chat
    assert unrelated.context["messages"][0]["content"] in chat


# --- Eval items without a vector of the current recipe -----------------------------------


def test_an_eval_item_not_embedded_yet_is_embedded_by_the_export_and_keeps_out_a_paraphrase(export_root):
    eval_item = item_make(comment=EVAL_COMMENT)
    paraphrase = item_make(comment=PARAPHRASE)
    unrelated = item_make(comment=UNRELATED)
    embed(paraphrase, unrelated)
    eval_export(eval_item)
    assert FeedbackItem.objects.get(id=eval_item.id).embedding_id is None

    train = train_export()

    assert exported_comments(export_root) == {unrelated.id: UNRELATED}
    assert train.held_out["reasons"] == {"near_duplicate_of_eval": 1}
    assert train.held_out["checked_against"]["eval_items_embedded_for_the_check"] == 1


def test_an_eval_item_embedded_under_an_older_recipe_is_embedded_again_for_the_check(export_root):
    eval_item = item_make(comment=EVAL_COMMENT)
    # What an older recipe left: another text, another vector.
    embed_plant(eval_item, unit(5))
    FeedbackItem.objects.filter(id=eval_item.id).update(embed_recipe=1, embed_text="Claimed success")
    paraphrase = item_make(comment=PARAPHRASE)
    unrelated = item_make(comment=UNRELATED)
    embed(paraphrase, unrelated)
    eval_export(eval_item)

    train = train_export()

    assert exported_comments(export_root) == {unrelated.id: UNRELATED}
    assert train.held_out["reasons"] == {"near_duplicate_of_eval": 1}


def test_a_train_export_fails_with_the_reason_when_an_unembedded_eval_item_cannot_be_embedded(
    export_root, monkeypatch
):
    eval_item = item_make(comment=EVAL_COMMENT)
    paraphrase = item_make(comment=PARAPHRASE)
    embed(paraphrase)
    eval_export(eval_item)
    monkeypatch.setenv("EMBEDDING_BACKEND", "no-such-backend")
    dataset = dataset_make("train-set", formats=("chat_jsonl", "csv"), filters={"model_versions": ["2.1"]})
    run = runs.export_run_start(dataset=dataset, trigger=Trigger.COMMAND, enqueue=False)

    with pytest.raises(holdout.HeldOutUncheckable):
        runs.export_run_execute(run_id=run.id)

    run.refresh_from_db()
    assert run.status == ExportRun.Status.FAILED
    assert f"eval item {eval_item.id} has no vector of the current text recipe" in run.error
    assert "EMBEDDING_BACKEND must be one of" in run.error
    assert not dataset.versions.exists()
    assert not (export_root / "train-set" / "v1").exists()
    # Once the embedder answers again, the same dataset exports, without the paraphrase.
    monkeypatch.delenv("EMBEDDING_BACKEND")
    train = export(dataset)
    assert train.item_count == 0 and train.held_out["reasons"] == {"near_duplicate_of_eval": 1}
