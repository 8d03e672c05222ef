"""Review queue, item detail and labels, agreement."""

from datetime import datetime
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.ids import id_parse
from core.roles import admin_required, is_admin, reviewer_required
from labeling.models import Label
from labeling.review import services
from labeling.review.agreement import agreement_summary, disputes_list, may_settle
from labeling.review.forms import DoubleReviewRequestForm, LabelForm
from labeling.review.queues import (
    DEFAULT_ORDER,
    ORDERS,
    Queue,
    order_parse,
    queue_candidates,
    queue_own_locked_item,
    queue_parse,
    queue_progress,
    queues_overview,
    reviewer_counts,
)
from labeling.review.selectors import (
    ReviewerView,
    categories_open,
    categories_suggested,
    item_for_review,
    item_history,
    item_lock,
    item_neighbour_ids,
    item_view_for,
    items_similar,
    label_previous_item_id,
)
from labeling.review.transcript import item_raw_payload, item_text

# Skipped items stay out of a reviewer's queue until the queue runs dry.
SKIPPED_SESSION_KEY = "review_skipped"
SKIPPED_MAX = 500


UNDO_SESSION_KEY = "label_undo"


def _order_query(queue: Queue) -> dict[str, str]:
    # The default order stays out of the URL, so the links of an unordered queue read as before.
    return {} if queue.order == DEFAULT_ORDER else {"order": queue.order}


def _queue_query(queue: Queue | None) -> str:
    """`queue=...` (and `order=...`) for the item page's own links and forms; empty outside a queue."""
    return urlencode({"queue": queue.key} | _order_query(queue)) if queue else ""


def _item_url(item_id: int, queue: Queue | None = None) -> str:
    url = reverse("item_detail", args=[item_id])
    return f"{url}?{_queue_query(queue)}" if queue else url


def _next_url(queue: Queue) -> str:
    return f"{reverse('review_next')}?{urlencode({'category': queue.key} | _order_query(queue))}"


def _undo_offer(request: HttpRequest) -> dict | None:
    """The last save's undo, while the page may still offer it, with the seconds it has left."""
    undo = request.session.get(UNDO_SESSION_KEY)
    if not isinstance(undo, dict):
        return None
    try:
        age = (timezone.now() - datetime.fromisoformat(undo["saved_at"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None
    left = services.UNDO_SHOWN_SECONDS - age
    if left <= 0:
        return None
    return {
        "item_id": undo["item"],
        "seconds": max(1, int(left)),
        "queue": undo.get("queue", ""),
        "order": undo.get("order", ""),
    }


def _skipped(request: HttpRequest, queue: Queue) -> list[int]:
    return list(request.session.get(SKIPPED_SESSION_KEY, {}).get(queue.key, []))


def _skipped_set(request: HttpRequest, queue: Queue, item_ids: list[int]) -> None:
    skipped = dict(request.session.get(SKIPPED_SESSION_KEY, {}))
    skipped[queue.key] = item_ids[-SKIPPED_MAX:]
    request.session[SKIPPED_SESSION_KEY] = skipped


# --- Item detail and label form -----------------------------------------------------


@reviewer_required
@require_http_methods(["GET", "POST"])
def item_detail(request: HttpRequest, item_id: int) -> HttpResponse:
    return _item_page(request, item_id=item_id)


@reviewer_required
@require_POST
def item_reveal(request: HttpRequest, item_id: int) -> HttpResponse:
    """The item page with the original, unscrubbed text; every reveal is on the audit trail."""
    item = item_for_review(item_id=item_id)
    if item is None:
        raise Http404("No such item.")
    services.original_revealed(item=item, user=request.user)
    response = _item_page(request, item_id=item_id, item=item, reveal=True)
    response["Cache-Control"] = "no-store"  # the original text stays out of every cache
    return response


def _item_page(request: HttpRequest, *, item_id: int, item=None, reveal: bool = False) -> HttpResponse:
    """The item page; a POST here is a label (the reveal renders the GET page with the original text)."""
    item = item or item_for_review(item_id=item_id)
    if item is None:
        raise Http404("No such item.")
    queue = (
        queue_parse(key=request.GET.get("queue"), order=request.GET.get("order"))
        if request.GET.get("queue")
        else None
    )
    view = item_view_for(item=item, reviewer=request.user)

    if request.method == "POST" and not reveal:
        form = LabelForm(request.POST)
        if form.is_valid():
            try:
                saved = services.label_save(
                    item=item, reviewer=request.user, queue=queue.key if queue else "", **form.label_data()
                )
            except services.LabelRefused as exc:
                form.add_error(exc.field, str(exc))
            else:
                if saved.created or saved.changes or saved.assignment_moved:
                    messages.success(request, f"Label saved for #{item.id}.")
                    request.session[UNDO_SESSION_KEY] = saved.undo | {"order": queue.order if queue else ""}
                else:
                    messages.info(request, f"Nothing changed on #{item.id}.")
                return redirect(_next_url(queue) if queue else _item_url(item.id))
    else:
        preselect = view.assignment.category_id if view.assignment and not view.hide_category else None
        initial = LabelForm.initial_for(label=view.my_label, category_id=preselect)
        if view.my_label is None and item.severity:
            # What the reporter said is the best first guess; the reviewer can still change it.
            initial["severity"] = item.severity
        form = LabelForm(initial=initial)
    context = _item_context(
        request,
        item=item,
        queue=queue,
        view=view,
        form=form,
        reveal=reveal,
    )
    return render(request, "labeling/review/item_detail.html", context, status=422 if form.errors else 200)


def _item_context(request, *, item, queue, view: ReviewerView, form, reveal: bool = False) -> dict:
    categories = categories_open()
    suggestions = categories_suggested(item=item, categories=categories, hide_current=view.hide_category)
    suggested_ids = {s.category.id for s in suggestions}
    lock = item_lock(item)
    lock_held_by_other = (
        lock is not None and lock.reviewer_id != request.user.id and lock.expires_at > timezone.now()
    )
    if queue is not None:
        previous_id = label_previous_item_id(reviewer=request.user, item_id=item.id)
        previous_url = _item_url(previous_id, queue) if previous_id else ""
        next_url = _next_url(queue)
        progress = queue_progress(queue=queue)
    else:
        previous_id, next_id = item_neighbour_ids(item=item)
        previous_url = _item_url(previous_id) if previous_id else ""
        next_url = _item_url(next_id) if next_id else ""
        progress = None
    text = item_text(item=item, reveal=reveal)
    selected = form["category"].value()
    checked_tags = set(form["tags"].value() or [])
    return {
        "item": item,
        "assignment": view.assignment,
        # Scrubbed unless the reviewer asked for the original (POST .../reveal).
        "text": text,
        "blocks": text.blocks,
        "transcript": text.transcript,
        "metadata": text.metadata,
        # The payload as received holds everything the scrubber hides: admins
        # see it only with a reveal, which is on the audit trail.
        "can_see_raw": is_admin(request.user),
        "raw_payload": item_raw_payload(item=item) if reveal and is_admin(request.user) else None,
        "queue": queue,
        "queue_query": _queue_query(queue),
        "progress": progress,
        "undo": _undo_offer(request),
        "previous_url": previous_url,
        "next_url": next_url,
        "lock_held_by_other": lock if lock_held_by_other else None,
        "blind": view.blind,
        "hide_category": view.hide_category,
        "other_labels": [] if view.blind else view.others,
        "hidden_labels": len(view.others) if view.blind else 0,
        "my_label": view.my_label,
        "form": form,
        "suggestions": suggestions,
        "other_categories": [c for c in categories if c.id not in suggested_ids],
        "selected_category": str(selected) if selected not in (None, "") else "",
        "tag_groups": [
            ("Reward hacking", _numbered_tags(services.REWARD_HACKING_TAGS, checked_tags, start=1)),
            ("Other", _numbered_tags(services.COMMON_TAGS, checked_tags, start=len(services.REWARD_HACKING_TAGS) + 1)),
        ],
        "audit_events": item_history(item=item, viewer=request.user, blind=view.blind),
    }


def _numbered_tags(tags, checked: set[str], *, start: int) -> list[tuple[str, bool, str]]:
    """(tag, checked, key): the key that toggles it after `t`; 1..9 then 0, as on the keyboard's top row."""
    keys = "1234567890"
    return [
        (tag, tag in checked, keys[number - 1] if number <= len(keys) else "")
        for number, tag in enumerate(tags, start=start)
    ]


@reviewer_required
@require_POST
def item_label_undo(request: HttpRequest, item_id: int) -> HttpResponse:
    """Undo this reviewer's last label save on the item, within seconds of it; back to the item."""
    undo = request.session.get(UNDO_SESSION_KEY)
    queue = queue_parse(key=request.POST.get("queue"), order=request.POST.get("order"))
    if not isinstance(undo, dict) or undo.get("item") != item_id:
        messages.error(request, f"There is no recent save on #{item_id} to undo.")
        return redirect(_item_url(item_id, queue))
    try:
        services.label_undo(reviewer=request.user, undo=undo)
    except services.LabelRefused as exc:
        messages.error(request, f"Not undone: {exc}.")
        return redirect(_item_url(item_id, queue))
    request.session.pop(UNDO_SESSION_KEY, None)
    if queue is not None:
        # Back to where the reviewer was: the item is theirs again while they fix the label.
        services.review_lock_take(item_id=item_id, reviewer=request.user)
        services.review_locks_release(reviewer=request.user, keep_item_id=item_id)
    messages.success(request, f"Undone: #{item_id} is back as it was before the save.")
    return redirect(_item_url(item_id, queue))


@reviewer_required
@require_GET
def item_similar(request: HttpRequest, item_id: int) -> HttpResponse:
    """The similar-items panel, loaded after the page so the vector search never delays it."""
    similar = items_similar(item_id=item_id, viewer=request.user)
    return render(request, "labeling/review/_similar.html", {"similar": similar})


# --- Review queue -------------------------------------------------------------------


@reviewer_required
@require_GET
def review_queue(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "labeling/review/queue.html",
        {
            "rows": queues_overview(),
            "selected": request.GET.get("category", ""),
            "orders": ORDERS,
            "selected_order": order_parse(request.GET.get("order")),
            "reviewer_counts": reviewer_counts(),
            "undo": _undo_offer(request),
        },
    )


@reviewer_required
@require_GET
def review_next(request: HttpRequest) -> HttpResponse:
    """Lock the next item of a queue for this reviewer and open it in queue mode."""
    queue = queue_parse(key=request.GET.get("category"), order=request.GET.get("order"))
    if queue is None:
        messages.error(request, "Pick a queue: an open category, unassigned items or double review.")
        return redirect("review_queue")
    now = timezone.now()
    item_id = queue_own_locked_item(queue=queue, reviewer=request.user, now=now)
    if item_id is not None:
        services.review_lock_take(item_id=item_id, reviewer=request.user, now=now)
    else:
        skipped = _skipped(request, queue)
        # Other reviewers may lock the same candidates meanwhile; a few
        # rounds get past them without looping forever.
        for _ in range(3):
            candidates = queue_candidates(queue=queue, reviewer=request.user, now=now, skipped=skipped)
            if not candidates:
                break
            item_id = services.review_next_take(reviewer=request.user, candidates=candidates, now=now)
            if item_id is not None:
                break
        if item_id is None:
            if skipped:
                _skipped_set(request, queue, [])
                messages.info(
                    request, f"Nothing left in “{queue.title}” but the {len(skipped)} you skipped; they are back now."
                )
            else:
                messages.info(request, f"Nothing left in “{queue.title}” for you. Well done.")
            return redirect(f"{reverse('review_queue')}?{urlencode({'category': queue.key} | _order_query(queue))}")
    return redirect(_item_url(item_id, queue))


@reviewer_required
@require_POST
def review_skip(request: HttpRequest) -> HttpResponse:
    """Release the lock on an item and move on; it comes back when the queue runs dry."""
    queue = queue_parse(key=request.POST.get("category"), order=request.POST.get("order"))
    item_id = id_parse(request.POST.get("item", ""))
    if item_id is None:
        messages.error(request, "Nothing to skip.")
        return redirect("review_queue")
    services.review_locks_release(reviewer=request.user, item_id=item_id)
    if queue is None:
        return redirect(_item_url(item_id))
    _skipped_set(request, queue, _skipped(request, queue) + [item_id])
    return redirect(_next_url(queue))


# --- Agreement ----------------------------------------------------------------------


@reviewer_required
@require_GET
def agreement(request: HttpRequest) -> HttpResponse:
    return _agreement_page(request, form=_request_form(request))


def _agreement_page(
    request: HttpRequest, *, form, status: int = 200, settle_error: str = "", settle_field: str = ""
) -> HttpResponse:
    disputes = disputes_list()
    # Which open disputes this viewer may settle: admins any, reviewers those they gave no label in.
    settleable = {d.item.id for d in disputes.open if may_settle(request.user, d.labels)}
    return render(
        request,
        "labeling/review/agreement.html",
        {
            "summary": agreement_summary(),
            "form": form,
            "disputes": disputes,
            "settleable": settleable,
            "verdicts": Label.Verdict.choices,
            "categories": categories_open() if settleable else [],
            "settle_error": settle_error,
            "settle_field": settle_field,
        },
        status=status,
    )


@reviewer_required
@require_POST
def agreement_settle(request: HttpRequest) -> HttpResponse:
    """Settle a dispute: keep one label, with the verdict or category written anew if the settler chose to."""
    item_id = id_parse(request.POST.get("item", ""))
    label_id = id_parse(request.POST.get("label", ""))
    category_text = request.POST.get("category", "").strip()
    category_id = id_parse(category_text) if category_text else None
    for missing, message, field_name in (
        (item_id is None, "Say which item to settle.", "item"),
        (label_id is None, "Say which label to keep.", "label"),
        (bool(category_text) and category_id is None, "That is not a category.", "category"),
    ):
        if missing:
            return _agreement_page(
                request, form=_request_form(request), status=422, settle_error=message, settle_field=field_name
            )
    try:
        settlement = services.dispute_settle(
            item_id=item_id,
            label_id=label_id,
            settled_by=request.user,
            verdict=request.POST.get("verdict") or None,
            category_id=category_id,
            seen=request.POST.get("seen") or None,
        )
    except services.SettlementRefused as exc:
        if exc.status == 403:
            raise PermissionDenied(str(exc)) from exc
        message = f"#{item_id} was not settled: {exc}."
        return _agreement_page(
            request, form=_request_form(request), status=exc.status, settle_error=message, settle_field=exc.field or ""
        )
    settled_as = settlement.get_verdict_display() + (f", {settlement.category.name}" if settlement.category else "")
    messages.success(request, f"#{item_id} settled as {settled_as}; exports use it from now on.")
    return redirect("agreement")


def _request_form(request: HttpRequest):
    return DoubleReviewRequestForm() if is_admin(request.user) else None


@admin_required
@require_POST
def agreement_sample(request: HttpRequest) -> HttpResponse:
    form = DoubleReviewRequestForm(request.POST)
    if not form.is_valid():
        return _agreement_page(request, form=form, status=422)
    count, category = form.cleaned_data["count"], form.cleaned_data["category"]
    created = services.double_reviews_request(requested_by=request.user, count=count, category=category)
    where = f" in “{category.name}”" if category else ""
    if not created:
        messages.error(request, f"No labelled items{where} are left to sample; nothing was requested.")
    elif len(created) < count:
        messages.warning(request, f"Only {len(created)} labelled items{where} were left; all are in double review now.")
    else:
        messages.success(request, f"{len(created)} items{where} are waiting for a second review.")
    return redirect("agreement")
