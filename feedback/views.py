"""Browser pages of the feedback app: the dogfooding report form."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from feedback import services
from feedback.forms import ReportForm
from feedback.schemas import ReportIn

FILED_SESSION_KEY = "report_filed"


@login_required
def report_new(request: HttpRequest) -> HttpResponse:
    form = ReportForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        item, _ = services.report_create(
            source=services.dogfood_form_source(),
            report=ReportIn(**form.cleaned_data),
            reporter=request.user,
        )
        # The page says so itself, with a link to the item for those who may open it: who may is
        # a labeling matter, which the template knows (is_reviewer) and this app must not import.
        request.session[FILED_SESSION_KEY] = item.id
        return redirect("report_new")
    filed = request.session.pop(FILED_SESSION_KEY, None) if request.method == "GET" else None
    return render(
        request, "feedback/report_new.html", {"form": form, "filed": filed}, status=422 if form.errors else 200
    )
