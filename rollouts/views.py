"""Rollout check pages: the checks and their flags, deciding a flag, a source's allow-list and custom checks.

Thin views: parse, call a service, render or redirect with a one-line message.
"""

from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.html import escape
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.ids import id_parse
from core.redirects import redirect_to_next
from core.roles import admin_required, reviewer_required
from feedback.models import FeedbackItem, Source
from labeling.compare.params import CompareError, compare_params_from_query
from rollouts import compare as rollout_compare
from rollouts import selectors, services
from rollouts.models import CustomCheck, RolloutFlag, SourceRolloutSettings

DECISIONS = {"confirm": RolloutFlag.Status.CONFIRMED, "dismiss": RolloutFlag.Status.DISMISSED}
SAMPLE_MAX = 100_000


@reviewer_required
@require_GET
def checks_page(request: HttpRequest) -> HttpResponse:
    names, versions = selectors.flag_rates_by_version()
    context = {
        "counts": selectors.flag_counts(),
        "columns": [(name, selectors.check_title(name)) for name in names],
        "versions": versions,
        "weeks": selectors.flag_rates_by_week(weeks=8),
        "rollouts": selectors.rollouts_count(),
        "sources": Source.objects.order_by("name").values_list("slug", "name"),
    }
    return render(request, "rollouts/checks.html", context)


@reviewer_required
@require_GET
def item_flags(request: HttpRequest, item_id: int) -> HttpResponse:
    """The item page's flags panel (loaded after the page, like the similar items)."""
    if not FeedbackItem.objects.filter(id=item_id).exists():
        raise Http404("No such item.")
    queue = request.GET.get("queue", "")
    next_url = f"/items/{item_id}/" + (f"?{urlencode({'queue': queue})}" if queue else "")
    context = {"flags": selectors.item_flags(item_id=item_id), "next_url": next_url, "item_id": item_id}
    return render(request, "rollouts/_item_flags.html", context)


@reviewer_required
@require_GET
def compare_rows(request: HttpRequest) -> HttpResponse:
    """The comparison's rows per check, for the compare page (the same query string as /compare/)."""
    try:
        params = compare_params_from_query(request.GET)
    except CompareError as exc:
        return HttpResponse(f"<p class=\"error\" role=\"alert\">{escape(exc.message)}</p>", status=exc.status)
    return render(request, "rollouts/_compare_checks.html", {"check_rows": rollout_compare.check_rows(params=params)})


@reviewer_required
@require_GET
def overview_rates(request: HttpRequest) -> HttpResponse:
    """The overview's flag rates per model version and week."""
    names, versions = selectors.flag_rates_by_version()
    context = {
        "columns": [(name, selectors.check_title(name)) for name in names],
        "versions": versions,
        "weeks": selectors.flag_rates_by_week(weeks=6),
    }
    return render(request, "rollouts/_overview_rates.html", context)


@reviewer_required
@require_POST
def flag_decide(request: HttpRequest, flag_id: int) -> HttpResponse:
    decision = DECISIONS.get(request.POST.get("decision", ""))
    next_url = request.POST.get("next")
    if decision is None:
        messages.error(request, "Choose confirm or dismiss.")
        return redirect_to_next(request, next_url, fallback="rollout_checks")
    try:
        flag = services.flag_decide(flag_id=flag_id, reviewer=request.user, decision=decision)
    except services.FlagRefused as exc:
        messages.error(request, f"Not saved: {exc}")
        return redirect_to_next(request, next_url, fallback="rollout_checks")
    info = selectors.check_info(flag.check_name)
    title = info.title if info else flag.check_name
    if decision == RolloutFlag.Status.CONFIRMED:
        tag = info.tag if info else ""
        extra = f"; your label on #{flag.item_id} is tagged “{tag}”" if tag else ""
        messages.success(request, f"Confirmed “{title}” on #{flag.item_id}{extra}.")
    else:
        messages.success(request, f"Dismissed “{title}” on #{flag.item_id}.")
    return redirect_to_next(request, next_url or f"/items/{flag.item_id}/", fallback="rollout_checks")


@admin_required
@require_http_methods(["GET", "POST"])
def source_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """A source's allow-list and custom checks (admins). A refused setting re-renders with its reason, 422."""
    source = get_object_or_404(Source, slug=slug)
    row = SourceRolloutSettings.objects.filter(source=source).first()
    hosts_text = "\n".join(row.allowed_hosts) if row else ""
    form = {"name": "", "explanation": "", "tool_pattern": "", "arguments_pattern": "", "sample": ""}
    error = None
    status = 200
    if request.method == "POST":
        action = request.POST.get("action", "")
        try:
            if action == "hosts":
                hosts_text = request.POST.get("allowed_hosts", "")
                if len(hosts_text) > 20_000:
                    raise services.CheckRefused("the allow-list is too long", field="allowed_hosts")
                hosts = services.allowed_hosts_parse(hosts_text)
                services.allowed_hosts_set(source=source, hosts=hosts, actor=request.user)
                messages.success(request, f"Saved {len(hosts)} allowed host{'s' if len(hosts) != 1 else ''} for {source}.")
                return redirect_to_next(request, request.path, fallback="rollout_checks")
            if action == "add_check":
                form = {key: request.POST.get(key, "") for key in form}
                if len(form["sample"]) > SAMPLE_MAX:
                    raise services.CheckRefused("the sample is too long (100,000 characters at most)", field="sample")
                check, matched = services.custom_check_create(source=source, actor=request.user, **form)
                messages.success(
                    request,
                    f"Added the check “{check.name}”: it matched {matched} sample call{'s' if matched != 1 else ''}. "
                    "New rollouts are checked with it; run `manage.py rollouts_check --all` for the earlier ones.",
                )
                return redirect_to_next(request, request.path, fallback="rollout_checks")
            if action == "retire_check":
                check_id = id_parse(request.POST.get("check", ""))
                updated = CustomCheck.objects.filter(source=source, id=check_id).update(is_active=False) if check_id else 0
                if not updated:
                    raise Http404("No such check.")
                messages.success(request, "Retired the check; its flags stay.")
                return redirect_to_next(request, request.path, fallback="rollout_checks")
            raise services.CheckRefused("unknown action", field="action")
        except services.CheckRefused as exc:
            error = exc
            status = 422
    context = {
        "source": source,
        "hosts_text": hosts_text,
        "custom_checks": CustomCheck.objects.filter(source=source).order_by("-is_active", "name"),
        "form": form,
        "error": error,
        "builtin": selectors.check_catalogue(),
    }
    return render(request, "rollouts/source_settings.html", context, status=status)
