"""Bulk actions from the search page, a category's page and an area's page.

Thin views: read the posted selection bar, call one service, go back to the
page. A refused action answers with a short page that says why (422 for a
bad field or an empty selection, 404 unknown items or target, 409 a target
that may not take items, 413 too many items, 403 not allowed) and changes
nothing.
"""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from core.ids import id_parse
from core.roles import reviewer_required
from labeling.bulk import selectors as bulk_selectors
from labeling.bulk import services, undo
from labeling.bulk.selectors import SCOPES, Selection, SelectionRefused
from labeling.bulk.services import BulkParams, BulkRefused

ORIGIN_PAGES = {"search": "/search/", "category": "/categories/{}/", "area": "/areas/{}/"}


def _next_url(request: HttpRequest) -> str:
    url = request.POST.get("next", "")
    if url and url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return url
    return "/search/"


def _query_params(raw: str) -> dict[str, str]:
    from django.http import QueryDict

    return {key: value for key, value in QueryDict(raw[:4000]).items() if key != "page"}


def _selection(request: HttpRequest) -> tuple[Selection, str]:
    """The posted selection and the page it came from ("search", "category:12", "area:3")."""
    scope = request.POST.get("scope", "")
    scope_id = id_parse(request.POST.get("scope_id", ""))
    origin = (f"{scope}:{scope_id}" if scope_id else scope) if scope in SCOPES else ""
    if request.POST.get("all_matching") == "1":
        if scope not in SCOPES:
            raise SelectionRefused("this page has no filter to select from", status=422, field="scope")
        return Selection(scope=scope, scope_id=scope_id, params=_query_params(request.POST.get("query", ""))), origin
    values = request.POST.getlist("items")
    ids = [id_parse(value) for value in values]
    if None in ids:
        raise SelectionRefused("the selection holds something that is not an item", status=422)
    return Selection(ids=tuple(ids)), origin


def _tags(request: HttpRequest) -> tuple[str, ...]:
    raw = request.POST.getlist("tags")
    return tuple(part.strip() for value in raw for part in value.split(",") if part.strip())


def _refused(request: HttpRequest, refusal: BulkRefused) -> HttpResponse:
    context = {"message": refusal.message, "field": refusal.field, "back": _next_url(request)}
    return render(request, "labeling/bulk/refused.html", context, status=refusal.status)


@reviewer_required
@require_POST
def bulk_apply(request: HttpRequest) -> HttpResponse:
    params = BulkParams(
        kind=request.POST.get("action", ""),
        category_id=id_parse(request.POST.get("category", "")),
        verdict=request.POST.get("verdict", ""),
        tags=_tags(request),
        split=request.POST.get("split", ""),
        dataset_id=id_parse(request.POST.get("dataset", "")),
        queue=request.POST.get("queue", "double") or "double",
    )
    try:
        selection, origin = _selection(request)
        action = services.bulk_apply(
            params=params, selection=selection, actor=request.user, made_by=request.user.get_username(), origin=origin
        )
    except (BulkRefused, SelectionRefused) as exc:
        return _refused(request, services.refusal_of(exc))
    messages.success(request, f"Done: {action.summary}. Undo it from “Bulk actions” on this page.")
    return redirect(_next_url(request))


@reviewer_required
@require_POST
def bulk_undo(request: HttpRequest, action_id: int) -> HttpResponse:
    try:
        result = undo.bulk_undo(action_id=action_id, user=request.user, made_by=request.user.get_username())
    except BulkRefused as refusal:
        return _refused(request, refusal)
    text = f"Undone: {result.action.summary}."
    if result.kept:
        text += f" {result.kept:,} item{'s' if result.kept != 1 else ''} changed since kept the later change."
    messages.success(request, text)
    return redirect(_next_url(request))


def bulk_panel_for(request: HttpRequest, *, scope: str, total: int, scope_id=None, category=None, area=None) -> dict:
    """The selection bar's context for a page (its filter is the page's own query)."""
    from urllib.parse import urlencode

    query = urlencode({key: value for key, value in request.GET.items() if key != "page" and value})
    return bulk_selectors.bulk_panel(
        scope=scope, scope_id=scope_id, total=total, query=query, next_url=request.get_full_path(),
        category=category, area=area,
    )
