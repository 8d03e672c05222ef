"""Category pages and cluster runs.

Thin views: read the request, call one selector or service, render. Every
view checks the role on the server; deleting needs the admin role. Refused
decisions answer with the page and a message: 422 when a form field is at
fault, 409 when the category's state forbids it.
"""

from datetime import timedelta

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.ids import id_parse
from core.roles import admin_required, is_admin, reviewer_required
from labeling.areas import selectors as area_selectors
from labeling.areas import services as area_services
from labeling.audit import audit_trail
from labeling.bulk.services import category_merge_undoable
from labeling.bulk.views import bulk_panel_for
from labeling.categories import selectors, services
from labeling.clustering.runs import RunAlreadyActive
from labeling.models import Category, ClusterRun


def _is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def _ids(values: list[str]) -> list[int] | None:
    """Item ids from checkboxes; None when one is not a number (a tampered form)."""
    ids = [id_parse(value) for value in values]
    return None if None in ids else ids


# --- Categories -------------------------------------------------------------------------


@reviewer_required
@require_GET
def category_list(request: HttpRequest) -> HttpResponse:
    model_version = request.GET.get("model_version", "").strip()
    areas = area_selectors.areas_by_id(model_version=model_version)
    area_filter = area_selectors.area_filter_parse(request.GET.get("area", ""), areas=areas)
    filters = selectors.CategoryListFilters(
        status=request.GET.get("status", selectors.DEFAULT_STATUS),
        model_version=model_version,
        search=request.GET.get("q", "").strip(),
        sort=request.GET.get("sort", selectors.DEFAULT_SORT),
        area=area_filter.value,
    )
    thumbs_down = selectors.thumbs_down_by_version()
    # Grouped by area once there are areas; until the first run makes some, the plain list.
    area_order = area_selectors.area_order_key(areas) if areas else None
    page = selectors.category_list_page(
        filters=filters, page_number=request.GET.get("page"), thumbs_down=thumbs_down, area_order=area_order
    )
    context = {
        "page_obj": page,
        "area_groups": area_selectors.area_groups(page.object_list, areas=areas) if areas else None,
        "filters": filters,
        "area_filter": area_filter,
        "area_choices": [area for area in areas.values() if area.is_open],
        "status_choices": selectors.STATUS_CHOICES,
        "sort_choices": selectors.SORT_CHOICES,
        "model_versions": sorted(version for version in thumbs_down if version),
        "merge_suggestions": selectors.merge_suggestions(),
    }
    return render(request, "labeling/categories/list.html", context)


def _category_or_404(category_id: int) -> Category:
    return get_object_or_404(
        Category.objects.select_related("merged_into", "created_by_run", "area").defer("area__centroid"), id=category_id
    )


def _detail_response(request: HttpRequest, category: Category, *, status: int = 200, **extra) -> HttpResponse:
    filters = selectors.CategoryItemFilters(
        rating=request.GET.get("rating", ""),
        model_version=request.GET.get("model_version", ""),
        variant=request.GET.get("variant", ""),
        assigned_by=request.GET.get("assigned_by", ""),
    )
    breakdown = selectors.category_item_breakdown(category=category)
    page = selectors.category_items_page(
        category=category, filters=filters, page_number=request.GET.get("page"), viewer=request.user
    )
    context = {
        "category": category,
        "representatives": selectors.category_representatives(category=category),
        "page_obj": page,
        "bulk": bulk_panel_for(
            request, scope="category", scope_id=category.id, total=page.paginator.count, category=category
        ),
        "filters": filters,
        "facets": breakdown.facets,
        "rating_choices": selectors.RATING_CHOICES,
        "assigned_by_choices": selectors.ASSIGNED_BY_CHOICES,
        "version_counts": breakdown.version_counts,
        "merge_targets": selectors.category_merge_targets(category=category),
        "area_targets": area_selectors.area_choices() if category.status != Category.Status.MERGED else [],
        "events": audit_trail(category=category),
        "can_delete": is_admin(request.user),
        "split_selected": set(),
        "split_name": "",
        **extra,
    }
    return render(request, "labeling/categories/detail.html", context, status=status)


def _refused(request: HttpRequest, category_id: int, refusal: services.CategoryRefused, **extra) -> HttpResponse:
    messages.error(request, refusal.message)
    category = _category_or_404(category_id)
    return _detail_response(request, category, status=422 if refusal.field else 409, **extra)


@reviewer_required
@require_GET
def category_detail(request: HttpRequest, category_id: int) -> HttpResponse:
    return _detail_response(request, _category_or_404(category_id))


@reviewer_required
@require_http_methods(["GET", "POST"])
def category_edit(request: HttpRequest, category_id: int) -> HttpResponse:
    """The name and description form: inline over htmx, a page of its own without."""
    category = _category_or_404(category_id)
    htmx = _is_htmx(request)
    form_template = "labeling/categories/_header_form.html" if htmx else "labeling/categories/edit.html"
    context = {"category": category, "name": category.name, "description": category.description, "error": ""}
    status = 200
    if request.method == "POST":
        name, description = request.POST.get("name", ""), request.POST.get("description", "")
        try:
            category = services.category_rename(
                category_id=category.id, user=request.user, name=name, description=description
            )
        except services.CategoryRefused as refusal:
            context.update(name=name, description=description, error=refusal.message)
            status = 422
        else:
            if not htmx:
                messages.success(request, f"Saved “{category.name}”.")
                return redirect("category_detail", category_id=category.id)
            category = _category_or_404(category.id)
            form_template = "labeling/categories/_rename_done.html"
            context.update(category=category, events=audit_trail(category=category))
    response = render(request, form_template, context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response


@reviewer_required
@require_POST
def category_confirm(request: HttpRequest, category_id: int) -> HttpResponse:
    _category_or_404(category_id)
    try:
        category = services.category_confirm(category_id=category_id, user=request.user)
    except services.CategoryRefused as refusal:
        return _refused(request, category_id, refusal)
    messages.success(request, f"Confirmed “{category.name}”.")
    return redirect("category_detail", category_id=category_id)


@reviewer_required
@require_POST
def category_archive(request: HttpRequest, category_id: int) -> HttpResponse:
    _category_or_404(category_id)
    try:
        category = services.category_archive(category_id=category_id, user=request.user)
    except services.CategoryRefused as refusal:
        return _refused(request, category_id, refusal)
    messages.success(request, f"Archived “{category.name}”. Cluster runs will sort nothing new into it.")
    return redirect("category_detail", category_id=category_id)


@reviewer_required
@require_POST
def category_merge(request: HttpRequest, category_id: int) -> HttpResponse:
    source = _category_or_404(category_id)
    target_id = id_parse(request.POST.get("target"))
    try:
        if target_id is None:
            raise services.CategoryRefused("Choose the category to merge into.", field="target")
        # Recorded with what it moved, so the target's page can undo it.
        target = category_merge_undoable(category_id=category_id, target_id=target_id, user=request.user)
    except services.CategoryRefused as refusal:
        return _refused(request, category_id, refusal)
    messages.success(request, f"Merged “{source.name}” into “{target.name}”; its items are here now.")
    return redirect("category_detail", category_id=target.id)


@reviewer_required
@require_POST
def category_split(request: HttpRequest, category_id: int) -> HttpResponse:
    _category_or_404(category_id)
    name = request.POST.get("name", "")
    item_ids = _ids(request.POST.getlist("items"))
    try:
        if item_ids is None:
            raise services.CategoryRefused("The selection holds something that is not an item.", field="items")
        new = services.category_split(category_id=category_id, item_ids=item_ids, name=name, user=request.user)
    except services.CategoryRefused as refusal:
        # Keep what the reviewer chose and typed, so a fix is one click.
        return _refused(request, category_id, refusal, split_selected=set(item_ids or []), split_name=name)
    messages.success(request, f"Split {new.size} items into the new category “{new.name}”.")
    return redirect("category_detail", category_id=new.id)


@reviewer_required
@require_POST
def category_move_to_area(request: HttpRequest, category_id: int) -> HttpResponse:
    _category_or_404(category_id)
    area_id = id_parse(request.POST.get("area"))
    try:
        if area_id is None:
            raise services.CategoryRefused("Choose the area to move it to.", field="area")
        category = area_services.category_move_to_area(category_id=category_id, area_id=area_id, user=request.user)
    except services.CategoryRefused as refusal:
        return _refused(request, category_id, refusal)
    messages.success(request, f"“{category.name}” is in the area “{category.area.name}” now; cluster runs keep it there.")
    return redirect("category_detail", category_id=category_id)


@admin_required
@require_POST
def category_delete(request: HttpRequest, category_id: int) -> HttpResponse:
    category = _category_or_404(category_id)
    try:
        services.category_delete(category_id=category_id, user=request.user)
    except services.CategoryRefused as refusal:
        return _refused(request, category_id, refusal)
    messages.success(request, f"Deleted “{category.name}”.")
    return redirect("category_list")


# --- Cluster runs ------------------------------------------------------------------------


def _duration_text(duration: timedelta | None) -> str:
    if duration is None:
        return ""
    seconds = max(duration.total_seconds(), 0.0)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _run_counts(run: ClusterRun) -> dict:
    # "items" would read as dict.items in a template; the page calls it signals.
    counts = dict(run.counts)
    counts["signals"] = counts.pop("items", None)
    return counts


def _run_list_response(request: HttpRequest, *, status: int = 200) -> HttpResponse:
    page = selectors.run_list_page(page_number=request.GET.get("page"))
    for run in page.object_list:
        run.duration_text = _duration_text(selectors.run_duration(run=run))
        run.shown_counts = _run_counts(run)
    return render(request, "labeling/runs/list.html", {"page_obj": page}, status=status)


@reviewer_required
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    return _run_list_response(request)


@reviewer_required
@require_POST
def run_start(request: HttpRequest) -> HttpResponse:
    try:
        run = services.cluster_run_request(user=request.user)
    except RunAlreadyActive as refused:
        active = refused.run
        messages.error(
            request,
            format_html(
                'A cluster run is already {}: <a href="{}">run #{}</a>. Start another when it has finished.',
                active.get_status_display().lower(),
                reverse("run_detail", args=[active.id]),
                active.id,
            ),
        )
        return _run_list_response(request, status=409)
    messages.success(request, f"Cluster run #{run.id} queued.")
    return redirect("run_detail", run_id=run.id)


def _run_context(run: ClusterRun) -> dict:
    done = run.status == ClusterRun.Status.DONE
    return {
        "run": run,
        "duration": _duration_text(selectors.run_duration(run=run)),
        "counts": _run_counts(run),
        "active": run.status in (ClusterRun.Status.QUEUED, ClusterRun.Status.RUNNING),
        "new_categories": selectors.run_new_categories(run=run) if done else [],
        "changes": selectors.run_changes(run=run) if done else {},
    }


@reviewer_required
@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(ClusterRun.objects.select_related("started_by"), id=run_id)
    return render(request, "labeling/runs/detail.html", _run_context(run))


@reviewer_required
@require_GET
def run_progress(request: HttpRequest, run_id: int) -> HttpResponse:
    """The polled part of the run page; it stops asking once the run has finished."""
    run = get_object_or_404(ClusterRun, id=run_id)
    response = render(request, "labeling/runs/_progress.html", _run_context(run))
    response["Cache-Control"] = "no-store"
    return response
