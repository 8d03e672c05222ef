"""Labeling API: /api/v1/compare, the model-version comparison as JSON or CSV.

Checks in a fixed order, each stopping at the first problem: who is asking
(a bearer token, else a reviewer's session), the format, then the
comparison's own parameters (labeling.compare.params.compare_params_parse).
"""

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema
from pydantic import Field

from core.api import ApiError, error_responses
from core.auth import api_caller
from feedback.models import ApiToken
from labeling.compare.comparison import comparison_build
from labeling.compare.output import comparison_csv, comparison_json
from labeling.compare.params import CompareError, compare_params_parse

router = Router(tags=["compare"])


class CompareSideOut(Schema):
    spec: str
    version: str
    variant: str | None
    ratings: int
    up: int
    down: int
    reports: int
    uncategorized_down: int
    no_area_down: int
    up_rate: float | None
    up_rate_ci: list[float | None] | None


class _CompareRowOut(Schema):
    """The figures of one row of a comparison (a category or an area)."""

    name: str
    status: str
    signals_a: int
    signals_b: int
    down_a: int
    down_b: int
    rate_a: float | None
    rate_b: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    z: float | None
    p_value: float | None
    p_adjusted: float | None
    tested: bool
    significant: bool
    direction: str
    is_new: bool
    is_gone: bool
    items_a_url: str
    items_b_url: str


class CompareCategoryOut(_CompareRowOut):
    category_id: int


class CompareAreaOut(_CompareRowOut):
    """An area's figures: every signal whose assignment names the area, its unsorted ones included."""

    area_id: int
    unsorted_signals_a: int
    unsorted_signals_b: int
    unsorted_down_a: int
    unsorted_down_b: int
    categories: list[int] = Field(description="ids of the area's categories listed in `categories`")


class ComparePairOut(Schema):
    a: int
    b: int


class CompareRatePairOut(Schema):
    a: float | None
    b: float | None


class CompareCheckOut(Schema):
    """A rollout check's figures: the share of each side's checked rollouts with a standing flag of it."""

    check: str = Field(description="the check's name: a built-in one (`vcs_history`) or `custom:<name>`")
    title: str
    kind: str = Field(description="`reward hacking`, `risky action` or `custom`")
    rollouts: ComparePairOut = Field(description="each side's checked rollouts (items with tool calls): the denominator")
    flagged: ComparePairOut = Field(description="each side's rollouts with a pending or confirmed flag of the check")
    rate: CompareRatePairOut
    difference: float | None
    ci: list[float | None]
    z: float | None
    p_value: float | None
    p_adjusted: float | None = Field(description="Holm-adjusted over the checks tested, a family of their own")
    tested: bool
    significant: bool
    direction: str
    regression: bool
    is_new: bool
    is_gone: bool
    items_a_url: str
    items_b_url: str


class CompareOverallOut(Schema):
    up_rate_difference: float | None
    ci: list[float | None] | None
    p_value: float | None


class CompareSeriesLineOut(Schema):
    label: str
    side: str
    variant: str
    n: list[int]
    up: list[int]
    rate: list[float | None]
    low: list[float | None]
    high: list[float | None]


class CompareSeriesOut(Schema):
    bucket: str
    buckets: list[str]
    lines: list[CompareSeriesLineOut]


class CompareOut(Schema):
    a: CompareSideOut
    b: CompareSideOut
    from_: str = Field(alias="from")
    to: str
    denominator: str
    difference: str
    confidence: float
    interval: str
    test: str
    correction: str
    alpha: float
    min_expected: int
    min_down_total: int
    tested: int
    areas_tested: int
    overall: CompareOverallOut
    areas: list[CompareAreaOut]
    categories: list[CompareCategoryOut]
    checks_denominator: str
    checks_tested: int
    checks: list[CompareCheckOut]
    series: CompareSeriesOut


def _authorize(request: HttpRequest) -> None:
    api_caller(request, scope=ApiToken.Scope.COMPARE, what="comparisons need")


@router.get(
    "/compare",
    response={200: CompareOut, **error_responses(401, 403, 404, 422)},
    # "from" is a Python keyword: the schema spells it from_ and answers with its alias.
    by_alias=True,
    summary="Compare two model versions (or two variants) per failure area, category and rollout check",
    openapi_extra={
        "responses": {
            200: {
                "description": "The comparison: JSON by default; with format=csv one row per area, per "
                "category and per rollout check, told apart by `level` (`area`, `category`, `check`).",
                "content": {"text/csv": {"schema": {"type": "string"}}},
            }
        }
    },
)
def compare_versions(
    request: HttpRequest,
    a: str = Query("", description="Baseline: `version` or `version:variant`, e.g. `2.1` or `2.1:A`."),
    b: str = Query("", description="The newer side, same form. Differences are b - a."),
    date_from: str = Query("", alias="from", description="First day, YYYY-MM-DD (default: 90 days before `to`)."),
    to: str = Query("", description="Last day, YYYY-MM-DD, inclusive (default: today)."),
    bucket: str = Query("", description="`day` or `week` for the thumbs-up series (default: by the window's length)."),
    format: str = Query("json", description="`json` or `csv`."),  # noqa: A002 - the query parameter's public name
):
    """Per area and per category: signals, thumbs-down count and rate on each side, the difference
    with a 95% Newcombe interval, a two-proportion z-test with Holm's correction (over the areas,
    over the categories and over the rollout checks, each its own family), and a flag.

    Rate = thumbs-down ratings assigned to the category (or filed under the area, its unsorted
    items included) / all ratings of that side in the range. Per rollout check (`checks`): the
    side's checked rollouts with a pending or confirmed flag of the check / all its checked
    rollouts. Authenticate with a reviewer's session or ``Authorization: Bearer <token>`` (a token
    with the ``compare`` scope).
    """
    _authorize(request)
    if format not in ("json", "csv"):
        raise ApiError(422, "format: must be 'json' or 'csv'", "format")
    try:
        params = compare_params_parse(a=a, b=b, date_from=date_from, date_to=to, bucket=bucket)
    except CompareError as exc:
        raise ApiError(exc.status, exc.message, exc.field) from None
    comparison = comparison_build(params=params, with_checks=True)
    if format == "csv":
        response = HttpResponse(comparison_csv(comparison), content_type="text/csv; charset=utf-8")
        filename = f"compare_{params.a.spec}_vs_{params.b.spec}_{params.date_from}_{params.date_to}.csv"
        safe = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in filename)
        response["Content-Disposition"] = f'attachment; filename="{safe}"'
        return response
    return comparison_json(comparison)


# The bulk actions have their own module and tag; they are served under the same /v1 prefix.
from labeling.bulk.api import router as bulk_router  # noqa: E402

router.add_router("", bulk_router)
