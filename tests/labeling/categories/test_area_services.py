"""Reviewer decisions on areas: rename, confirm, merge, and moving a category to an area."""

import re

import numpy as np
import pytest

from labeling.areas import services
from labeling.models import Area, Assignment, AuditEvent, Category
from tests.factories.areas import (
    area_make,
    category_make,
    item_make,
    snapshot,
    unit,
    unsorted_make,
)
from tests.factories.clustering import add_items, run_clustering
from tests.factories import source_make, user_make

pytestmark = pytest.mark.django_db


# --- Helpers the view tests share ------------------------------------------------------


def actions_of(**where) -> list[str]:
    return list(AuditEvent.objects.filter(**where).order_by("id").values_list("action", flat=True))


@pytest.fixture
def source():
    return source_make()[0]


@pytest.fixture
def rita():
    return user_make("rita", "reviewer")


@pytest.fixture
def two_areas(source):
    """Two areas, each with a category and some unsorted items."""
    files = area_make("files", keywords=["file"])
    tests = area_make("tests", keywords=["tests"])
    wrong_file = category_make("wrong file", [item_make(source) for _ in range(3)], area=files, centroid=unit(1))
    claims = category_make("claims tests pass", [item_make(source) for _ in range(2)], area=tests, centroid=unit(2))
    unsorted_make(files, [item_make(source) for _ in range(2)])
    unsorted_make(tests, [item_make(source)])
    return files, tests, wrong_file, claims


# --- Rename ------------------------------------------------------------------------------


def test_a_rename_sets_the_name_marks_it_named_by_a_reviewer_and_records_before_and_after(two_areas, rita):
    files, *_ = two_areas
    area = services.area_rename(area_id=files.id, user=rita, name="  Files   and edits ")
    assert area.name == "Files and edits" and area.named_by_reviewer
    files.refresh_from_db()
    assert files.name == "Files and edits" and files.named_by_reviewer
    event = AuditEvent.objects.get(area=files)
    assert (event.actor, event.action) == (rita, "renamed")
    assert event.details == {"name": {"before": "files", "after": "Files and edits"}}


def test_saving_the_machines_name_unchanged_keeps_it_for_later_runs_and_a_second_save_changes_nothing(two_areas, rita):
    files, *_ = two_areas
    services.area_rename(area_id=files.id, user=rita, name="files")
    files.refresh_from_db()
    assert files.named_by_reviewer
    assert actions_of(area=files) == ["kept name"]
    before = snapshot()
    services.area_rename(area_id=files.id, user=rita, name="files")
    assert snapshot() == before


@pytest.mark.parametrize("name, message", [
    ("", "An area needs a name."),
    ("   \t ", "An area needs a name."),
    ("x" * 201, "A name can have at most 200 characters."),
    ("bad\x00name", "A name cannot contain a NUL character."),
])
def test_a_rename_to_an_empty_an_over_long_or_a_nul_name_is_refused_and_changes_nothing(two_areas, rita, name, message):
    files, *_ = two_areas
    before = snapshot()
    with pytest.raises(services.AreaRefused) as refused:
        services.area_rename(area_id=files.id, user=rita, name=name)
    assert refused.value.message == message and refused.value.field == "name"
    assert snapshot() == before


def test_a_name_of_exactly_200_characters_is_accepted(two_areas, rita):
    files, *_ = two_areas
    assert services.area_rename(area_id=files.id, user=rita, name="y" * 200).name == "y" * 200


def test_renaming_an_area_that_does_not_exist_is_refused(rita):
    with pytest.raises(services.AreaRefused, match="That area no longer exists."):
        services.area_rename(area_id=987654, user=rita, name="x")


def test_a_merged_area_cannot_be_renamed(two_areas, rita):
    files, tests, *_ = two_areas
    services.area_merge(area_id=files.id, target_id=tests.id, user=rita)
    before = snapshot()
    with pytest.raises(services.AreaRefused, match="“files” has been merged into “tests”; rename that one instead."):
        services.area_rename(area_id=files.id, user=rita, name="again")
    assert snapshot() == before


# --- Confirm -----------------------------------------------------------------------------


def test_confirm_marks_a_proposed_area_confirmed_and_refuses_a_second_time(two_areas, rita):
    files, *_ = two_areas
    services.area_confirm(area_id=files.id, user=rita)
    files.refresh_from_db()
    assert files.status == Area.Status.CONFIRMED
    assert AuditEvent.objects.get(area=files).details == {"status": {"before": "proposed", "after": "confirmed"}}
    with pytest.raises(services.AreaRefused, match="“files” is already confirmed."):
        services.area_confirm(area_id=files.id, user=rita)


# --- Merge -------------------------------------------------------------------------------


def test_a_merge_moves_the_categories_and_every_item_to_the_target_and_is_audited_on_both_areas(two_areas, rita, source):
    files, tests, wrong_file, claims = two_areas
    files_items = set(Assignment.objects.filter(area=files).values_list("item_id", flat=True))
    placed = category_make("placed here", [item_make(source)], area=files, area_by_reviewer=True)

    target = services.area_merge(area_id=files.id, target_id=tests.id, user=rita)

    assert target == tests
    files.refresh_from_db()
    assert files.status == Area.Status.MERGED and files.merged_into == tests
    assert set(Category.objects.filter(area=tests).values_list("name", flat=True)) == {
        "wrong file", "claims tests pass", "placed here"
    }
    assert not Category.objects.filter(area=files).exists()
    assert not Assignment.objects.filter(area=files).exists()
    assert files_items <= set(Assignment.objects.filter(area=tests).values_list("item_id", flat=True))
    assert Assignment.objects.filter(area=tests, category=None).count() == 3  # 2 moved in + its own 1
    # Who placed a category is kept: a reviewer's placement stays a reviewer's.
    assert Category.objects.get(id=placed.id).area_by_reviewer
    assert not Category.objects.get(id=wrong_file.id).area_by_reviewer

    source_event = AuditEvent.objects.get(area=files)
    assert (source_event.actor, source_event.action) == (rita, "merged")
    assert source_event.details["into"] == {"id": tests.id, "name": "tests"}
    assert source_event.details["categories moved"] == 2 and source_event.details["unsorted items moved"] == 2
    target_event = AuditEvent.objects.get(area=tests)
    assert target_event.details["from"] == {"id": files.id, "name": "files"}
    assert target_event.details["items moved"] == 6  # 3 + 1 in categories, 2 unsorted
    # Each moved category's own history says where it went.
    assert actions_of(category=wrong_file) == ["moved to area"]
    assert AuditEvent.objects.get(category=wrong_file).details["area"] == {"before": "files", "after": "tests"}
    assert actions_of(category=claims) == []


def test_a_merge_sends_an_item_along_with_its_category_even_if_its_own_area_was_stale(two_areas, rita, source):
    files, tests, wrong_file, _ = two_areas
    stray = item_make(source)
    Assignment.objects.create(item=stray, category=wrong_file, area=None)
    services.area_merge(area_id=files.id, target_id=tests.id, user=rita)
    assert Assignment.objects.get(item=stray).area == tests


def test_a_merge_points_areas_merged_earlier_into_the_absorbed_one_at_the_target(two_areas, rita):
    files, tests, *_ = two_areas
    older = area_make("older")
    services.area_merge(area_id=older.id, target_id=files.id, user=rita)
    services.area_merge(area_id=files.id, target_id=tests.id, user=rita)
    older.refresh_from_db()
    assert older.merged_into == tests
    assert AuditEvent.objects.filter(area=tests, action="merged").get().details["earlier merges redirected"] == 1


def test_a_merge_recomputes_the_targets_centre_from_its_categories(two_areas, rita):
    files, tests, wrong_file, claims = two_areas
    services.area_merge(area_id=files.id, target_id=tests.id, user=rita)
    tests.refresh_from_db()
    expected = 3 * np.frombuffer(unit(1), dtype=np.float32) + 2 * np.frombuffer(unit(2), dtype=np.float32)
    expected /= np.linalg.norm(expected)
    assert np.allclose(np.frombuffer(tests.centroid, dtype=np.float32), expected, atol=1e-5)


def test_a_merge_into_itself_is_refused(two_areas, rita):
    files, *_ = two_areas
    before = snapshot()
    with pytest.raises(services.AreaRefused) as refused:
        services.area_merge(area_id=files.id, target_id=files.id, user=rita)
    assert refused.value.message == "An area cannot be merged into itself." and refused.value.field == "target"
    assert snapshot() == before


def test_a_merge_into_a_merged_area_is_refused(two_areas, rita):
    files, tests, *_ = two_areas
    gone = area_make("gone", status=Area.Status.MERGED, merged_into=tests)
    before = snapshot()
    with pytest.raises(services.AreaRefused) as refused:
        services.area_merge(area_id=files.id, target_id=gone.id, user=rita)
    assert refused.value.message == "“gone” is merged; merge into a proposed or confirmed area."
    assert refused.value.field == "target"
    assert snapshot() == before


def test_merging_an_area_that_was_merged_already_is_refused(two_areas, rita):
    files, tests, *_ = two_areas
    third = area_make("third")
    services.area_merge(area_id=files.id, target_id=tests.id, user=rita)
    before = snapshot()
    with pytest.raises(services.AreaRefused, match="“files” has been merged into “tests” already."):
        services.area_merge(area_id=files.id, target_id=third.id, user=rita)
    assert snapshot() == before


@pytest.mark.parametrize("which", ["source", "target"])
def test_a_merge_naming_an_unknown_area_is_refused(two_areas, rita, which):
    files, *_ = two_areas
    before = snapshot()
    ids = {"area_id": files.id, "target_id": 987654} if which == "target" else {"area_id": 987654, "target_id": files.id}
    with pytest.raises(services.AreaRefused) as refused:
        services.area_merge(**ids, user=rita)
    expected = "The area to merge into no longer exists." if which == "target" else "That area no longer exists."
    assert refused.value.message == expected
    assert snapshot() == before


# --- Moving a category ---------------------------------------------------------------------


def test_moving_a_category_puts_it_and_its_items_in_the_area_and_marks_it_placed_by_a_reviewer(two_areas, rita):
    files, tests, wrong_file, _ = two_areas
    moved_items = set(wrong_file.assignments.values_list("item_id", flat=True))

    category = services.category_move_to_area(category_id=wrong_file.id, area_id=tests.id, user=rita)

    assert category.area == tests and category.area_by_reviewer
    wrong_file.refresh_from_db()
    assert wrong_file.area == tests and wrong_file.area_by_reviewer
    assert set(Assignment.objects.filter(category=wrong_file).values_list("area", flat=True)) == {tests.id}
    assert moved_items <= set(Assignment.objects.filter(area=tests).values_list("item_id", flat=True))
    # The old area's unsorted bucket stays where it was.
    assert Assignment.objects.filter(area=files, category=None).count() == 2

    event = AuditEvent.objects.get(category=wrong_file)
    assert (event.actor, event.action) == (rita, "moved to area")
    assert event.details == {"area": {"before": "files", "after": "tests"}, "items moved": 3}
    out = AuditEvent.objects.get(area=files)
    assert out.action == "category moved out"
    assert out.details["category"] == {"id": wrong_file.id, "name": "wrong file"}
    assert out.details["to"] == {"id": tests.id, "name": "tests"}
    came_in = AuditEvent.objects.get(area=tests)
    assert came_in.action == "category moved in" and came_in.details["from"] == {"id": files.id, "name": "files"}


def test_moving_a_category_without_an_area_records_it_on_the_category_and_the_new_area(two_areas, rita, source):
    _, tests, *_ = two_areas
    loose = category_make("loose", [item_make(source)])
    services.category_move_to_area(category_id=loose.id, area_id=tests.id, user=rita)
    assert AuditEvent.objects.get(category=loose).details["area"] == {"before": None, "after": "tests"}
    assert AuditEvent.objects.filter(area=tests).get().details["from"] == "no area"


def test_moving_a_category_to_the_area_it_is_in_pins_it_there_and_a_second_time_is_refused(two_areas, rita):
    files, _, wrong_file, _ = two_areas
    services.category_move_to_area(category_id=wrong_file.id, area_id=files.id, user=rita)
    wrong_file.refresh_from_db()
    assert wrong_file.area == files and wrong_file.area_by_reviewer
    assert actions_of(category=wrong_file) == ["kept area"]
    assert actions_of(area=files) == ["kept category"]
    before = snapshot()
    with pytest.raises(services.AreaRefused, match="“wrong file” is already in “files”."):
        services.category_move_to_area(category_id=wrong_file.id, area_id=files.id, user=rita)
    assert snapshot() == before


def test_moving_to_a_merged_area_is_refused(two_areas, rita):
    files, tests, _, claims = two_areas
    services.area_merge(area_id=files.id, target_id=tests.id, user=rita)
    other = area_make("other")
    before = snapshot()
    with pytest.raises(services.AreaRefused) as refused:
        services.category_move_to_area(category_id=claims.id, area_id=files.id, user=rita)
    assert refused.value.message == "“files” has been merged into “tests”; move the category there instead."
    assert refused.value.field == "area"
    assert snapshot() == before
    assert services.category_move_to_area(category_id=claims.id, area_id=other.id, user=rita).area == other


def test_moving_a_merged_category_is_refused(two_areas, rita):
    files, tests, wrong_file, _ = two_areas
    gone = category_make("gone", area=files, status=Category.Status.MERGED, merged_into=wrong_file)
    before = snapshot()
    with pytest.raises(services.AreaRefused, match="“gone” has been merged; move the category it was merged into."):
        services.category_move_to_area(category_id=gone.id, area_id=tests.id, user=rita)
    assert snapshot() == before


@pytest.mark.parametrize("which", ["category", "area"])
def test_moving_with_an_unknown_category_or_area_is_refused(two_areas, rita, which):
    _, tests, wrong_file, _ = two_areas
    before = snapshot()
    if which == "area":
        ids = {"category_id": wrong_file.id, "area_id": 987654}
    else:
        ids = {"category_id": 987654, "area_id": tests.id}
    with pytest.raises(services.AreaRefused, match=f"That {which} no longer exists."):
        services.category_move_to_area(**ids, user=rita)
    assert snapshot() == before


# --- What cluster runs keep ---------------------------------------------------------------


def test_a_cluster_run_keeps_a_reviewers_area_name_and_a_category_a_reviewer_moved(centers, rita):
    source, _ = source_make()
    add_items(source, centers, 30, seed=1)
    run_clustering()
    areas = list(Area.objects.order_by("id"))
    assert len(areas) >= 2
    first, second = areas[0], areas[1]
    moved = Category.objects.filter(area=first).order_by("id").first()
    services.area_rename(area_id=first.id, user=rita, name="Files and edits")
    services.category_move_to_area(category_id=moved.id, area_id=second.id, user=rita)

    add_items(source, centers, 10, seed=2)
    run_clustering()

    first.refresh_from_db()
    moved.refresh_from_db()
    assert first.name == "Files and edits" and first.named_by_reviewer
    assert moved.area == second and moved.area_by_reviewer
    assert set(Assignment.objects.filter(category=moved).values_list("area", flat=True)) == {second.id}


def test_a_cluster_run_gives_each_area_the_keywords_of_its_items_and_a_later_run_refreshes_them(centers):
    source, _ = source_make()
    add_items(source, centers, 30, seed=1)
    run_clustering()
    areas = list(Area.objects.open())
    assert len(areas) >= 2
    for area in areas:
        texts = " ".join(Assignment.objects.filter(area=area).values_list("item__embed_text", flat=True))
        said = set(re.findall(r"\b\w\w+\b", texts))  # words as the keywords' tokenizer reads them
        assert area.keywords and all(set(keyword.split()) <= said for keyword in area.keywords), area.keywords

    Area.objects.update(keywords=[])
    add_items(source, centers, 10, seed=2)
    run_clustering()
    assert all(area.keywords for area in Area.objects.open())


def test_after_an_area_merge_a_cluster_run_puts_nothing_in_the_merged_area(centers, rita):
    source, _ = source_make()
    add_items(source, centers, 30, seed=1)
    run_clustering()
    first, second = list(Area.objects.order_by("id"))[:2]
    services.area_merge(area_id=first.id, target_id=second.id, user=rita)

    add_items(source, centers, 10, seed=2)
    run_clustering()

    first.refresh_from_db()
    assert first.status == Area.Status.MERGED and first.merged_into == second
    assert not Category.objects.filter(area=first).exists()
    assert not Assignment.objects.filter(area=first).exists()
