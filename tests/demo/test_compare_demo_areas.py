"""The area level of the comparison on the demo corpus after a real cluster run.

tests/demo/test_compare_demo.py builds its categories from the corpus's ground
truth, with no areas. Here the corpus goes through the pipeline as
``demo_load --process`` runs it (the real embedding model, one cluster run,
which creates the areas), once for the module, inside a transaction that is
rolled back afterwards; the tests read the comparisons' JSON.

2.2's planted regression (demo/corpus.py): "Asked needless
clarification questions" goes from weight 0.8 on 2.1 to 6.0 on 2.2 while
2.2's thumbs-down rate falls from 0.39 to 0.27 overall: about 2% of 2.1's
ratings and 9% of 2.2's. The clustering spreads the theme over several
categories, each too small to test alone; the comparison flags it at their
area (the area resolution keeps it apart from the walls of text, which 2.2
writes less often).
"""

import io
from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from demo import corpus as demo_corpus
from feedback import pipeline
from feedback.models import FeedbackItem
from labeling.clustering.runs import cluster_run_execute, cluster_run_start
from labeling.clustering.services import items_assign
from labeling.compare.comparison import comparison_build
from labeling.compare.output import comparison_json
from labeling.compare.params import compare_params_parse
from labeling.models import Area, Assignment, Category, ClusterRun

# The marks also tell pytest-django to create the test database the module fixture writes into.
pytestmark = [pytest.mark.slow, pytest.mark.django_db]  # embedding 2,400 signals, one cluster run: about 90 s

PAIRS = (("2.0", "2.1"), ("2.1", "2.2"))


def _embed_and_cluster() -> None:
    """What ``demo_load --process`` does, without its dataset exports."""
    waiting = list(
        FeedbackItem.objects.filter(status=FeedbackItem.Status.RECEIVED).order_by("id").values_list("id", flat=True)
    )
    for start in range(0, len(waiting), 256):
        chunk = waiting[start:start + 256]
        items_assign(item_ids=pipeline.items_embed(item_ids=chunk))
    run = cluster_run_start(trigger=ClusterRun.Trigger.COMMAND, enqueue=False)
    cluster_run_execute(run_id=run.id)
    run.refresh_from_db()
    assert run.status == ClusterRun.Status.DONE, run.error


def _theme_areas() -> dict[str, Counter]:
    """Per theme, how many of its thumbs-down landed in each area: where the clustering put the theme."""
    signals = demo_corpus.generate(count=2400, seed=7, anchor=demo_corpus.anchor_for(timezone.now()))
    theme_of = {signal.external_id: signal.theme for signal in signals if signal.theme}
    found: dict[str, Counter] = defaultdict(Counter)
    rows = Assignment.objects.filter(item__rating=-1).values_list("item__external_id", "area_id")
    for external_id, area_id in rows:
        if external_id in theme_of and area_id:
            found[theme_of[external_id]][area_id] += 1
    return found


@pytest.fixture(scope="module")
def clustered(django_db_setup, django_db_blocker) -> dict:
    """The comparisons' JSON (2.0 vs 2.1, 2.1 vs 2.2, the whole corpus) and where each theme's thumbs-down went."""
    today = timezone.localdate()
    with django_db_blocker.unblock(), transaction.atomic():
        call_command("demo_load", stdout=io.StringIO())
        _embed_and_cluster()
        figures = {
            pair: comparison_json(
                comparison_build(
                    params=compare_params_parse(
                        a=pair[0], b=pair[1], date_from=str(today - timedelta(days=31)), date_to=str(today)
                    )
                )
            )
            for pair in PAIRS
        }
        figures["theme_areas"] = _theme_areas()
        figures["open_categories"] = Category.objects.open().count()
        figures["areas"] = Area.objects.count()
        # Nothing of this outlives the module: the rest of the suite starts from an empty database.
        transaction.set_rollback(True)
    return figures


def _main_area(clustered: dict, theme: str) -> int:
    return clustered["theme_areas"][theme].most_common(1)[0][0]


def _area_row(data: dict, area_id: int) -> dict:
    return next(row for row in data["areas"] if row["area_id"] == area_id)


def _describe(data: dict) -> str:
    return "; ".join(
        f"{row['name']}: {row['down_a']} -> {row['down_b']} down, p {row['p_value']}, adjusted {row['p_adjusted']}"
        for row in data["areas"]
    )


def test_after_a_cluster_run_the_areas_hold_every_categorised_thumbs_down_and_each_category_once(clustered):
    assert clustered["areas"] >= 2
    for pair in PAIRS:
        data = clustered[pair]
        assert data["areas"] and data["areas_tested"] >= 2
        for side, key in (("a", "down_a"), ("b", "down_b")):
            assert sum(row[key] for row in data["areas"]) + data[side]["no_area_down"] == data[side]["down"]
        listed = [category_id for row in data["areas"] for category_id in row["categories"]]
        assert len(listed) == len(set(listed))
        assert set(listed) <= {row["category_id"] for row in data["categories"]}


def test_after_a_cluster_run_2_2_is_significantly_better_in_the_area_of_the_special_cased_tests(clustered):
    data = clustered[("2.1", "2.2")]
    row = _area_row(data, _main_area(clustered, "special-cased-test"))
    assert row["tested"] and row["significant"] and row["direction"] == "better", _describe(data)


def test_after_a_cluster_run_2_2s_planted_regression_is_flagged_at_least_at_the_area_level(clustered):
    data = clustered[("2.1", "2.2")]
    regressed = {row["area_id"] for row in data["areas"] if row["significant"] and row["direction"] == "worse"}
    planted = {_main_area(clustered, theme) for theme in ("needless-clarification", "slow-or-timed-out")}
    assert regressed & planted, _describe(data)
