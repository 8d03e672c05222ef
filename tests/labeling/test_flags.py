"""labeling.flags: the rollout checks reach labeling's pages through what rollouts registers, not by import."""

import pytest

from labeling import flags
from labeling.review.queues import queue_parse
from labeling.search.selectors import SearchFilters, items_search
from tests.factories.exports import item_make

pytestmark = pytest.mark.django_db


def test_rollouts_registers_its_checks_when_the_app_loads():
    registered = flags.item_flags()
    assert registered is not flags.NONE
    assert "vcs_history" in registered.names()
    assert registered.title("vcs_history") and registered.title("no-such-check") is None
    assert queue_parse(key="flag:vcs_history").title.startswith("Flagged: ")


def test_without_registered_flags_the_flag_places_stay_empty(monkeypatch):
    item_make()
    monkeypatch.setattr(flags, "_registered", flags.NONE)
    assert queue_parse(key="flag:vcs_history") is None
    assert not items_search(filters=SearchFilters(flag="any")).exists()
    assert items_search(filters=SearchFilters()).count() == 1
    assert flags.item_flags().comparison_rows(["a", "b"]) == [[], []]
