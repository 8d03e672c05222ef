"""labeling.compare.comparison: per-category comparison of two model versions on synthetic data with a known answer.

The planted data set (`planted`): version 1.0 (a) and 1.1 (b), 200 ratings
each between 2026-11-02 and 2026-11-15. Thumbs-down per category:

| category    | a  | b  | what it is for                                           |
| ----------- | -- | -- | -------------------------------------------------------- |
| Regressed   | 10 | 40 | the planted regression: flagged                          |
| Unchanged   | 20 | 20 | no change: not flagged                                   |
| Borderline  | 20 | 35 | raw p = 0.029 < 0.05 but Holm-adjusted 0.059: not flagged |
| Rare        |  1 |  8 | raw p = 0.018, but only 9 thumbs-down: not tested        |
| Brand new   |  0 | 12 | only on b: marked new (and flagged)                      |
| Gone        |  3 |  0 | only on a: marked gone                                   |

plus uncategorised thumbs-down (6 on a, 5 on b) and thumbs-up to 200;
b also has one report in Regressed. Outside the data set, and so ignored:
ratings before the window, another version, an archived category.
"""

from datetime import date, timedelta

import pytest

from feedback.models import Source
from labeling.compare.comparison import _bucket_of, _bucket_starts, comparison_build
from labeling.compare.params import (
    CompareError,
    CompareParams,
    Side,
    compare_params_parse,
    side_choices,
)
from labeling.compare.saved import (
    pinned_regressions,
    saved_comparison_create,
    saved_comparison_delete,
    saved_comparison_params,
    saved_comparison_set_pinned,
)
from labeling.compare.statistics import (
    holm_adjust,
    normal_approximation_holds,
    wilson_interval,
)
from labeling.models import Category, SavedComparison
from tests.factories.compare import END, START, add_items, by_name, params, planted_data
from tests.factories import source_make

pytestmark = pytest.mark.django_db


def test_the_planted_regression_is_flagged_with_figures_that_match_a_hand_computation():
    cats = planted_data()
    comparison = comparison_build(params=params())
    row = by_name(comparison)["Regressed"]

    assert (comparison.a.ratings, comparison.b.ratings) == (200, 200)
    assert (row.signals_a, row.signals_b) == (10, 41)  # b's report is a signal but not a rating
    assert (row.down_a, row.down_b) == (10, 40)
    assert row.rate_a == pytest.approx(0.05) and row.rate_b == pytest.approx(0.20)
    assert row.difference == pytest.approx(0.15)
    # Newcombe: Wilson 10/200 = [0.027383, 0.089578], 40/200 = [0.150452, 0.260855];
    # low = 0.15 - sqrt((0.2 - 0.150452)^2 + (0.089578 - 0.05)^2), high likewise.
    assert row.ci_low == pytest.approx(0.086585, abs=1e-6)
    assert row.ci_high == pytest.approx(0.214922, abs=1e-6)
    # Pooled p = 50/400 = 0.125; se = sqrt(0.125 * 0.875 * (1/200 + 1/200)) = 0.0330719; z = 0.15 / se.
    assert row.z == pytest.approx(4.535574, abs=1e-6)
    assert row.p_value == pytest.approx(5.744712e-06, rel=1e-5)
    # Holm over the 4 tested categories; this one has the smallest p, so times 4.
    assert row.p_adjusted == pytest.approx(2.297885e-05, rel=1e-5)
    assert row.tested and row.significant and row.direction == "worse" and row.regression
    assert not row.is_new
    assert row.items_b_url == (
        f"/search/?category={cats['Regressed'].id}&model_version=1.1&rating=down&date_from=2026-11-02&date_to=2026-11-15"
    )


def test_an_unchanged_category_is_not_flagged():
    planted_data()
    row = by_name(comparison_build(params=params()))["Unchanged"]
    assert (row.down_a, row.down_b, row.difference) == (20, 20, 0.0)
    assert row.ci_low == pytest.approx(-0.060162, abs=1e-6) and row.ci_high == pytest.approx(0.060162, abs=1e-6)
    assert row.z == 0.0 and row.p_value == pytest.approx(1.0) and row.p_adjusted == pytest.approx(1.0)
    assert row.tested and not row.significant and row.direction == ""


def test_holms_correction_keeps_a_borderline_category_from_being_flagged():
    planted_data()
    comparison = comparison_build(params=params())
    row = by_name(comparison)["Borderline"]
    assert comparison.tested == 4  # Regressed, Unchanged, Borderline, Brand new
    assert row.p_value == pytest.approx(0.029416, abs=1e-6)  # significant on its own...
    assert row.p_adjusted == pytest.approx(0.058833, abs=1e-6)  # ...but second largest of 4: times 2
    assert row.tested and not row.significant
    # Its own (uncorrected) interval excludes zero: the page says the flag uses the corrected test.
    assert row.ci_low == pytest.approx(0.007225, abs=1e-6) and row.ci_high == pytest.approx(0.142953, abs=1e-6)


def test_small_samples_are_not_tested_or_flagged_even_with_a_small_raw_p_value():
    planted_data()
    row = by_name(comparison_build(params=params()))["Rare"]
    assert (row.down_a, row.down_b) == (1, 8)
    assert row.p_value == pytest.approx(0.018273, abs=1e-6)
    assert not row.tested and not row.significant and row.p_adjusted is None
    assert row.p_display == "0.0183"


def test_a_category_seen_only_on_the_newer_side_is_marked_new_and_one_seen_only_on_the_older_gone():
    planted_data()
    rows = by_name(comparison_build(params=params()))
    new, gone = rows["Brand new"], rows["Gone"]
    assert new.is_new and not new.is_gone and (new.signals_a, new.signals_b) == (0, 12)
    assert new.ci_low == pytest.approx(0.028414, abs=1e-6) and new.ci_high == pytest.approx(0.101932, abs=1e-6)
    assert new.p_adjusted == pytest.approx(0.0013081, rel=1e-4) and new.significant
    assert gone.is_gone and not gone.is_new and not gone.tested
    assert not any(row.is_new for name, row in rows.items() if name != "Brand new")


def test_categories_are_sorted_from_the_largest_increase_to_the_largest_decrease():
    planted_data()
    names = [row.name for row in comparison_build(params=params()).categories]
    assert names == ["Regressed", "Borderline", "Brand new", "Rare", "Unchanged", "Gone"]


def test_the_side_totals_and_the_overall_thumbs_up_difference_match_a_hand_computation():
    planted_data()
    comparison = comparison_build(params=params())
    a, b = comparison.a, comparison.b
    assert (a.ratings, a.down, a.up, a.reports, a.uncategorized_down) == (200, 60, 140, 0, 6)
    # The archived category's thumbs-down lie before the window; b's uncategorised are the 5 planted.
    assert (b.ratings, b.down, b.up, b.reports, b.uncategorized_down) == (200, 120, 80, 1, 5)
    assert a.up_rate == pytest.approx(0.7)
    assert (a.up_low, a.up_high) == (pytest.approx(0.633209, abs=1e-6), pytest.approx(0.759253, abs=1e-6))
    assert comparison.overall_difference == pytest.approx(-0.3)
    assert comparison.overall_low == pytest.approx(-0.388246, abs=1e-6)
    assert comparison.overall_high == pytest.approx(-0.203851, abs=1e-6)
    assert comparison.overall_p_value == pytest.approx(1.637296e-09, rel=1e-4)
    # The denominator is every rating of the side, so the categories' rates add up to the categorised share.
    categorised = sum(row.down_b for row in comparison.categories)
    assert sum(row.rate_b for row in comparison.categories) == pytest.approx(categorised / 200)


def test_an_archived_category_is_left_out_and_its_thumbs_down_count_as_uncategorised():
    cats = planted_data()
    source = Source.objects.get(slug__startswith="planted")
    archived = Category.objects.get(name="Archived")
    add_items(source, version="1.1", n=2, category=archived)
    comparison = comparison_build(params=params())
    assert "Archived" not in by_name(comparison)
    assert comparison.b.uncategorized_down == 7 and comparison.b.ratings == 202
    assert cats["Regressed"].id in {row.category_id for row in comparison.categories}


def test_two_variants_of_one_version_can_be_compared():
    source, _ = source_make()
    category = Category.objects.create(name="Verbose", status=Category.Status.CONFIRMED)
    add_items(source, version="2.0", variant="A", n=5, category=category)
    add_items(source, version="2.0", variant="A", n=95, rating=1)
    add_items(source, version="2.0", variant="B", n=30, category=category)
    add_items(source, version="2.0", variant="B", n=70, rating=1)
    comparison = comparison_build(params=params(a="2.0:A", b="2.0:B"))
    row = by_name(comparison)["Verbose"]
    assert (comparison.a.ratings, comparison.b.ratings) == (100, 100)
    assert (row.rate_a, row.rate_b) == (pytest.approx(0.05), pytest.approx(0.30))
    assert row.regression
    assert "variant=B" in row.items_b_url and "variant=A" in row.items_a_url


def test_the_thumbs_up_series_has_daily_points_with_wilson_intervals_and_a_line_per_variant():
    source, _ = source_make()
    add_items(source, version="3.0", variant="A", n=6, rating=1, days=1)  # 2026-11-02: A 6 of 8 up
    add_items(source, version="3.0", variant="A", n=2, rating=-1, days=1)
    add_items(source, version="3.0", variant="B", n=2, rating=1, days=1)  # B 2 of 2 up
    add_items(source, version="3.1", variant="A", n=3, rating=1, start=START + timedelta(days=1), days=1)
    three_days = compare_params_parse(a="3.0", b="3.1", date_from="2026-11-02", date_to="2026-11-04")
    comparison = comparison_build(params=three_days)
    series = comparison.series
    assert series["bucket"] == "day" and series["buckets"] == ["2026-11-02", "2026-11-03", "2026-11-04"]
    lines = {line["label"]: line for line in series["lines"]}
    assert list(lines) == ["3.0", "3.0 · A", "3.0 · B", "3.1"]  # 3.1 has only variant A: no breakdown
    whole = lines["3.0"]
    assert whole["n"] == [10, 0, 0] and whole["up"] == [8, 0, 0]
    assert whole["rate"] == [0.8, None, None]
    # Wilson 8/10: centre (0.8 + 1.920729/10) / 1.384146 = 0.716744, half 0.227736.
    assert whole["low"][0] == pytest.approx(0.490162, abs=1e-6) and whole["high"][0] == pytest.approx(0.943318, abs=1e-6)
    assert lines["3.0 · A"]["rate"][0] == 0.75 and lines["3.0 · B"]["rate"][0] == 1.0
    assert lines["3.1"]["n"] == [0, 3, 0]


def test_weekly_buckets_start_on_monday_and_the_first_is_clipped_to_the_range():
    params_ = CompareParams(
        a=Side("x"), b=Side("y"), date_from=date(2026, 11, 4), date_to=date(2026, 11, 20), bucket="week"
    )
    # 2026-11-04 is a Wednesday; the next Mondays are the 9th and the 16th.
    assert _bucket_starts(params_) == [date(2026, 11, 4), date(2026, 11, 9), date(2026, 11, 16)]
    assert _bucket_of(date(2026, 11, 8), params_) == date(2026, 11, 4)
    assert _bucket_of(date(2026, 11, 18), params_) == date(2026, 11, 16)


def test_a_long_range_is_drawn_by_week_unless_asked_otherwise():
    source, _ = source_make()
    add_items(source, version="1.0", n=1, rating=1)
    add_items(source, version="1.1", n=1, rating=1)
    long = compare_params_parse(a="1.0", b="1.1", date_from="2026-09-01", date_to="2026-11-15")
    short = compare_params_parse(a="1.0", b="1.1", date_from="2026-11-01", date_to="2026-11-15")
    daily = compare_params_parse(a="1.0", b="1.1", date_from="2026-09-01", date_to="2026-11-15", bucket="day")
    assert (long.bucket, short.bucket, daily.bucket) == ("week", "day", "day")


def test_the_comparison_reads_four_queries_however_many_categories(django_assert_num_queries):
    planted_data()
    p = params()
    with django_assert_num_queries(4):  # the sides' spans, the counts, their categories, the series (no areas here)
        comparison_build(params=p)


# --- Parameters ---------------------------------------------------------------------------


@pytest.fixture
def two_versions():
    source, _ = source_make()
    add_items(source, version="1.0", variant="A", n=1)
    add_items(source, version="1.0", variant="B", n=1)
    add_items(source, version="1.1", variant="A", n=1)


@pytest.mark.parametrize(
    ("query", "status", "field"),
    [
        ({"a": "", "b": "1.1"}, 422, "a"),
        ({"a": "1.0", "b": ""}, 422, "b"),
        ({"a": "9.9", "b": "1.1"}, 404, "a"),
        ({"a": "1.0", "b": "9.9"}, 404, "b"),
        ({"a": "1.0", "b": "1.1:Z"}, 404, "b"),
        ({"a": "1.0", "b": "1.0"}, 422, "b"),
        ({"a": "1.0:A", "b": "1.0"}, 422, "b"),  # overlapping sides share ratings
        ({"a": "1.0", "b": "1.1", "date_from": "yesterday"}, 422, "from"),
        ({"a": "1.0", "b": "1.1", "date_to": "2026-02-30"}, 422, "to"),
        ({"a": "1.0", "b": "1.1", "date_from": "2026-11-10", "date_to": "2026-11-01"}, 422, "to"),
        ({"a": "1.0", "b": "1.1", "bucket": "month"}, 422, "bucket"),
        ({"a": "1.0", "b": "1.1", "date_from": "2024-01-01", "date_to": "2026-01-01", "bucket": "day"}, 422, "bucket"),
    ],
)
def test_bad_parameters_name_the_field_at_fault(two_versions, query, status, field):
    with pytest.raises(CompareError) as caught:
        compare_params_parse(**query)
    assert (caught.value.status, caught.value.field) == (status, field)
    assert caught.value.message.startswith(f"{field}:")


def test_sides_are_a_version_or_a_version_and_variant_and_dates_default_to_the_last_90_days(two_versions):
    p = compare_params_parse(a="1.0:B", b="1.1", today=date(2026, 11, 30))
    assert p.a == Side("1.0", "B") and p.b == Side("1.1")
    assert (p.date_from, p.date_to, p.bucket) == (date(2026, 9, 2), date(2026, 11, 30), "week")
    assert p.url == "/compare/?a=1.0%3AB&b=1.1&from=2026-09-02&to=2026-11-30"


def test_side_choices_list_versions_newest_first_with_their_variants(two_versions):
    choices = side_choices()
    assert choices["options"] == [
        ("1.1", "1.1 (all variants)"), ("1.1:A", "1.1 · variant A"),
        ("1.0", "1.0 (all variants)"), ("1.0:A", "1.0 · variant A"), ("1.0:B", "1.0 · variant B"),
    ]


# --- Statistics on their own --------------------------------------------------------------


def test_wilson_interval_matches_the_textbook_values():
    low, high = wilson_interval(successes=10, total=200)
    assert (low, high) == (pytest.approx(0.027383, abs=1e-6), pytest.approx(0.089578, abs=1e-6))
    assert wilson_interval(successes=0, total=200) == (0.0, pytest.approx(0.018845, abs=1e-6))
    assert wilson_interval(successes=0, total=0) == (0.0, 1.0)


def test_holm_adjusts_in_step_down_order_and_stays_monotone():
    # Sorted 0.01, 0.02, 0.04 -> 0.03, 0.04, 0.04 (the last is max(0.04, 1 * 0.04)).
    assert holm_adjust([0.04, 0.01, 0.02]) == [pytest.approx(0.04), pytest.approx(0.03), pytest.approx(0.04)]
    assert holm_adjust([0.5, 0.6]) == [pytest.approx(1.0), pytest.approx(1.0)]
    assert holm_adjust([]) == []


def test_the_normal_approximation_needs_enough_thumbs_down_on_both_sides():
    assert not normal_approximation_holds(x_a=0, n_a=6, x_b=3, n_b=6)  # tiny samples
    assert not normal_approximation_holds(x_a=1, n_a=200, x_b=8, n_b=200)  # under 10 in all
    assert not normal_approximation_holds(x_a=5, n_a=20, x_b=30, n_b=2000)  # 20 * 35/2020 < 5 expected
    assert normal_approximation_holds(x_a=0, n_a=200, x_b=12, n_b=200)


# --- Saved comparisons and the overview ---------------------------------------------------


def test_a_pinned_comparison_reports_its_significant_regressions_for_the_overview():
    planted_data()
    fixed = saved_comparison_create(params=params(), name="1.1 launch")
    saved_comparison_create(params=params(), name="unpinned", pinned=False)
    statuses = pinned_regressions(today=date(2026, 11, 30))
    assert [status.saved.id for status in statuses] == [fixed.id]
    assert [row.name for row in statuses[0].regressions] == ["Regressed", "Brand new"]
    assert statuses[0].url == "/compare/?a=1.0&b=1.1&from=2026-11-02&to=2026-11-15"


def test_a_rolling_pin_keeps_its_length_and_ends_today():
    planted_data()
    saved = saved_comparison_create(params=params(), rolling=True)
    saved.refresh_from_db()
    assert (saved.window_days, saved.date_from, saved.date_to) == (14, None, None)
    later = saved_comparison_params(saved=saved, today=date(2026, 12, 31))
    assert (later.date_from, later.date_to) == (date(2026, 12, 18), date(2026, 12, 31))
    # Two weeks on, the planted window has rolled out: nothing left to flag.
    assert pinned_regressions(today=date(2026, 12, 31))[0].regressions == []
    assert pinned_regressions(today=END)[0].regressions


def test_pinned_regressions_read_six_queries_however_many_pins(django_assert_num_queries):
    planted_data()
    for b in ("1.1", "0.9"):
        saved_comparison_create(params=params(b=b))
    saved_comparison_create(params=params(a="0.9"), rolling=True)
    # Three for the areas and categories, three for the rollout checks (rollouts.compare.check_rows_many).
    with django_assert_num_queries(6):
        statuses = pinned_regressions(today=date(2026, 11, 30))
        # Regressed first, each group newest first: 1.0 vs 0.9, 1.0 vs 1.1, then the rolling one (nothing in its window).
        found = [(status.params.b.version, len(status.regressions)) for status in statuses]
        assert found == [("0.9", 1), ("1.1", 2), ("1.1", 0)]


def test_pinning_and_deleting_a_saved_comparison():
    planted_data()
    saved = saved_comparison_create(params=params())
    assert str(saved) == "1.0 → 1.1" and saved.pinned
    assert saved_comparison_set_pinned(saved_id=saved.id, pinned=False)
    assert pinned_regressions() == []
    assert saved_comparison_delete(saved_id=saved.id)
    assert not SavedComparison.objects.exists()
    assert not saved_comparison_delete(saved_id=saved.id)
