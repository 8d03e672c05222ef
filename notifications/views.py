"""The notifications page: destinations and their deliveries (admins only).

Thin views: read the form, call one service, render. A new Standard Webhooks
destination's secret is shown once, in the answer to the form that made it.
"""

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from core.ids import id_parse
from core.roles import admin_required
from notifications import selectors, services
from notifications.forms import DestinationEditForm, DestinationForm
from notifications.models import SUBSCRIBABLE, Delivery, Destination


def _page(request: HttpRequest, *, form: DestinationForm | None = None, status: int = 200, **extra) -> HttpResponse:
    destination_id = id_parse(request.GET.get("destination", ""))
    delivery_status = request.GET.get("status", "")
    if delivery_status not in Delivery.Status.values:
        delivery_status = ""
    form = form or DestinationForm()
    context = {
        "form": form,
        "subscribable": SUBSCRIBABLE,
        # What the add form shows ticked: what was sent, or the first event for a fresh form.
        "form_events": form.data.getlist("events") if form.is_bound else form.fields["events"].initial,
        "new_category_min": settings.NOTIFY_NEW_CATEGORY_MIN_ITEMS,
        "destinations": selectors.destinations_list(),
        "deliveries": selectors.deliveries_recent(destination_id=destination_id, status=delivery_status),
        "delivery_status": delivery_status,
        "delivery_statuses": Delivery.Status.choices,
        "destination_filter": destination_id,
        **extra,
    }
    return render(request, "notifications/page.html", context, status=status)


@admin_required
@require_GET
def notifications_page(request: HttpRequest) -> HttpResponse:
    return _page(request)


@admin_required
@require_POST
@never_cache
def destination_new(request: HttpRequest) -> HttpResponse:
    form = DestinationForm(request.POST)
    if form.is_valid():
        try:
            destination, secret = services.destination_create(
                name=form.cleaned_data["name"],
                kind=form.cleaned_data["kind"],
                url=form.cleaned_data["url"],
                events=form.cleaned_data["events"],
                user=request.user,
            )
        except services.DestinationRefused as refusal:
            form.refuse(refusal.field, refusal.message)
        else:
            # Rendered, not redirected: the secret is in this answer and nowhere else.
            return render(request, "notifications/created.html", {"destination": destination, "secret": secret})
    return _page(request, form=form, status=422)


def _destination_or_404(destination_id: int) -> Destination:
    return get_object_or_404(Destination, id=destination_id)


@admin_required
@require_POST
def destination_edit(request: HttpRequest, destination_id: int) -> HttpResponse:
    destination = _destination_or_404(destination_id)
    form = DestinationEditForm(request.POST)
    if form.is_valid():
        try:
            services.destination_update(
                destination=destination,
                name=form.cleaned_data["name"],
                events=form.cleaned_data["events"],
                is_active=form.cleaned_data["is_active"],
            )
        except services.DestinationRefused as refusal:
            form.refuse(refusal.field, refusal.message)
        else:
            messages.success(request, f"Destination “{destination.name}” saved.")
            return redirect("notifications")
    errors = "; ".join(message for messages_ in form.errors.values() for message in messages_)
    destination.refresh_from_db()
    return _page(request, status=422, edit_error=errors, edit_error_for=destination.id)


@admin_required
@require_POST
def destination_test(request: HttpRequest, destination_id: int) -> HttpResponse:
    destination = _destination_or_404(destination_id)
    services.notify_test(destination=destination, user=request.user)
    messages.success(request, f"Test message queued for “{destination.name}”; its delivery is listed below.")
    return redirect("notifications")


@admin_required
@require_POST
def destination_delete(request: HttpRequest, destination_id: int) -> HttpResponse:
    destination = _destination_or_404(destination_id)
    services.destination_delete(destination_id=destination.id)
    messages.success(request, f"Destination “{destination.name}” and its deliveries deleted.")
    return redirect("notifications")


@admin_required
@require_POST
def delivery_retry(request: HttpRequest, delivery_id: int) -> HttpResponse:
    delivery = get_object_or_404(Delivery.objects.select_related("destination"), id=delivery_id)
    if services.delivery_retry(delivery_id=delivery.id):
        messages.success(request, f"Delivery {delivery.id} to “{delivery.destination.name}” queued again.")
    else:
        messages.error(request, f"Delivery {delivery.id} is {delivery.get_status_display().lower()}, not failed: nothing to retry.")
    return redirect("notifications")
