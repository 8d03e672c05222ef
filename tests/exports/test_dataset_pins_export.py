"""Items pinned to a dataset (the bulk action "Pin to dataset") are exported whatever its filters say."""

import pytest

from labeling.models import DatasetPin
from tests.factories.exports import dataset_make, export, item_make, member_ids

pytestmark = pytest.mark.django_db


def test_a_pinned_item_is_exported_although_the_filters_leave_it_out(export_root):
    kept = item_make(rating=-1)
    pinned = item_make(rating=1, comment="Exactly what I asked for.")
    other = item_make(rating=1, comment="Fine.")
    dataset = dataset_make(filters={"rating": "down"})
    assert member_ids(export(dataset)) == {kept.id}

    DatasetPin.objects.create(dataset_id=dataset.id, item=pinned)
    assert member_ids(export(dataset)) == {kept.id, pinned.id}
    assert other.id not in member_ids(export(dataset, force=True))


def test_a_pin_of_another_dataset_changes_nothing(export_root):
    kept = item_make(rating=-1)
    pinned_elsewhere = item_make(rating=1)
    dataset = dataset_make(filters={"rating": "down"})
    elsewhere = dataset_make(name="other-set", filters={"rating": "down"})
    DatasetPin.objects.create(dataset_id=elsewhere.id, item=pinned_elsewhere)
    assert member_ids(export(dataset)) == {kept.id}
    assert member_ids(export(elsewhere)) == {kept.id, pinned_elsewhere.id}
