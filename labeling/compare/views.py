"""Model-version comparison pages: /compare/ and its saved (pinned) comparisons.

Thin views: parse the query, call labeling.compare.comparison, render. A comparison that
cannot be made (a missing or unknown version, a bad date) renders the page
with the form and the error, at the status the API would answer.
"""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from core.redirects import redirect_to_next
from core.roles import reviewer_required
from labeling import counts
from labeling.compare.comparison import DENOMINATOR, comparison_build
from labeling.compare.output import chart_data
from labeling.compare.params import (
    DEFAULT_WINDOW_DAYS,
    CompareError,
    DataWindow,
    compare_params_from_query,
    compare_params_parse,
    data_window,
    side_choices,
)
from labeling.compare.saved import (
    saved_comparison_create,
    saved_comparison_delete,
    saved_comparison_set_pinned,
    saved_comparisons,
)
from labeling.compare.statistics import ALPHA, MIN_DOWN_TOTAL, MIN_EXPECTED


def _form_values(request: HttpRequest, choices: dict, spans: dict) -> tuple[dict, DataWindow | None]:
    """What the form shows: the query as given, or the two most recent versions; without dates,
    the days on which both sides have ratings (and that window, to say so on the page)."""
    given = any(request.GET.get(key) for key in ("a", "b", "from", "to"))
    form = {
        "a": request.GET.get("a", "" if given else choices["default_a"]),
        "b": request.GET.get("b", "" if given else choices["default_b"]),
        "from": request.GET.get("from", "").strip(),
        "to": request.GET.get("to", "").strip(),
        "bucket": request.GET.get("bucket", ""),
    }
    window = None
    if not form["from"] and not form["to"]:
        window = data_window(a=form["a"], b=form["b"], spans=spans)
        if window is not None:
            form["from"], form["to"] = window.date_from.isoformat(), window.date_to.isoformat()
    return form, window


@reviewer_required
@require_GET
def compare_page(request: HttpRequest) -> HttpResponse:
    # Each version's first and last rated day: read once for the menu and the default window.
    spans = counts.rated_spans()
    choices = side_choices(spans=spans)
    form, window = _form_values(request, choices, spans)
    context = {
        "choices": choices,
        "form": form,
        "data_window": window,
        "saved": saved_comparisons(),
        "denominator": DENOMINATOR,
        "alpha": ALPHA,
        "min_expected": MIN_EXPECTED,
        "min_down_total": MIN_DOWN_TOTAL,
        "default_window_days": DEFAULT_WINDOW_DAYS,
    }
    if not any(request.GET.get(key) for key in ("a", "b")):
        # The first visit: the form, pre-filled, and nothing computed yet.
        return render(request, "labeling/compare/page.html", context)
    try:
        params = compare_params_parse(
            a=form["a"], b=form["b"], date_from=form["from"], date_to=form["to"], bucket=form["bucket"]
        )
    except CompareError as exc:
        context["error"] = exc
        return render(request, "labeling/compare/page.html", context, status=exc.status)
    comparison = comparison_build(params=params)
    context |= {
        "params": params,
        "comparison": comparison,
        "chart": chart_data(comparison),
    }
    return render(request, "labeling/compare/page.html", context)


@reviewer_required
@require_POST
def saved_create(request: HttpRequest) -> HttpResponse:
    try:
        params = compare_params_from_query(request.POST)
    except CompareError as exc:
        messages.error(request, f"Not saved: {exc.message}")
        return redirect("compare")
    saved = saved_comparison_create(
        params=params,
        name=request.POST.get("name", ""),
        rolling=request.POST.get("rolling") == "1",
        pinned=request.POST.get("pinned", "1") == "1",
        user=request.user,
    )
    messages.success(request, f"Saved “{saved}”{' and pinned it to the overview' if saved.pinned else ''}.")
    return redirect(params.url)


@reviewer_required
@require_POST
def saved_pin(request: HttpRequest, saved_id: int) -> HttpResponse:
    pinned = request.POST.get("pinned") == "1"
    if saved_comparison_set_pinned(saved_id=saved_id, pinned=pinned):
        messages.success(request, "Pinned to the overview." if pinned else "Unpinned from the overview.")
    else:
        messages.error(request, "That saved comparison no longer exists.")
    # The overview and the compare page post back here; anything else goes to the compare page.
    return redirect_to_next(request, request.POST.get("next"), fallback="compare")


@reviewer_required
@require_POST
def saved_delete(request: HttpRequest, saved_id: int) -> HttpResponse:
    if saved_comparison_delete(saved_id=saved_id):
        messages.success(request, "Deleted the saved comparison.")
    else:
        messages.error(request, "That saved comparison no longer exists.")
    return redirect("compare")
