"""Area pages: the list, an area's page, and the decisions taken on it.

Thin views, like the category pages: read the request, call one selector or
service, render. Reading and deciding both need the reviewer role (as every
category page does). A refused decision answers with the page and a message:
422 when a form field is at fault, 409 when the area's state forbids it.
"""

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from core.ids import id_parse
from core.roles import reviewer_required
from labeling.areas import selectors, services
from labeling.audit import audit_trail
from labeling.bulk.views import bulk_panel_for
from labeling.categories.services import CategoryRefused
from labeling.models import Area


@reviewer_required
@require_GET
def area_list(request: HttpRequest) -> HttpResponse:
    context = {
        "areas": selectors.area_list(),
        "merged": selectors.areas_merged(),
        "unsorted_total": selectors.unsorted_total(),
    }
    return render(request, "labeling/areas/list.html", context)


def _area_or_404(area_id: int) -> Area:
    area = selectors.area_with_counts(area_id=area_id)
    if area is None:
        raise Http404("No such area.")
    return area


def _detail_response(request: HttpRequest, area: Area, *, status: int = 200, **extra) -> HttpResponse:
    is_open = area.is_open
    page = selectors.area_unsorted_page(area=area, page_number=request.GET.get("page"))
    context = {
        "area": area,
        "categories": selectors.area_categories(area=area),
        "page_obj": page,
        "bulk": bulk_panel_for(request, scope="area", scope_id=area.id, total=page.paginator.count, area=area),
        "unsorted_total": selectors.unsorted_total(),
        "merge_targets": selectors.area_merge_targets(area=area) if is_open else [],
        "events": audit_trail(area=area),
        "rename_name": area.name,
        "rename_error": "",
        **extra,
    }
    return render(request, "labeling/areas/detail.html", context, status=status)


def _refused(request: HttpRequest, area_id: int, refusal: CategoryRefused, **extra) -> HttpResponse:
    messages.error(request, refusal.message)
    return _detail_response(request, _area_or_404(area_id), status=422 if refusal.field else 409, **extra)


@reviewer_required
@require_GET
def area_detail(request: HttpRequest, area_id: int) -> HttpResponse:
    return _detail_response(request, _area_or_404(area_id))


@reviewer_required
@require_POST
def area_rename(request: HttpRequest, area_id: int) -> HttpResponse:
    _area_or_404(area_id)
    name = request.POST.get("name", "")
    try:
        area = services.area_rename(area_id=area_id, user=request.user, name=name)
    except CategoryRefused as refusal:
        if refusal.field != "name":
            return _refused(request, area_id, refusal)
        # The error stands at the field, with what was typed (less any NUL), so a fix is one edit.
        return _detail_response(
            request, _area_or_404(area_id), status=422, rename_name=name.replace("\x00", ""), rename_error=refusal.message
        )
    messages.success(request, f"Saved “{area.name}”. Cluster runs keep a name a reviewer saved.")
    return redirect("area_detail", area_id=area_id)


@reviewer_required
@require_POST
def area_confirm(request: HttpRequest, area_id: int) -> HttpResponse:
    _area_or_404(area_id)
    try:
        area = services.area_confirm(area_id=area_id, user=request.user)
    except CategoryRefused as refusal:
        return _refused(request, area_id, refusal)
    messages.success(request, f"Confirmed “{area.name}”.")
    return redirect("area_detail", area_id=area_id)


@reviewer_required
@require_POST
def area_merge(request: HttpRequest, area_id: int) -> HttpResponse:
    source = _area_or_404(area_id)
    target_id = id_parse(request.POST.get("target"))
    try:
        if target_id is None:
            raise services.AreaRefused("Choose the area to merge into.", field="target")
        target = services.area_merge(area_id=area_id, target_id=target_id, user=request.user)
    except CategoryRefused as refusal:
        return _refused(request, area_id, refusal)
    messages.success(
        request, f"Merged “{source.name}” into “{target.name}”; its categories and unsorted items are here now."
    )
    return redirect("area_detail", area_id=target.id)
