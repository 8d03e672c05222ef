"""Browser pages of the feedback app: the dogfooding report form."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from feedback import services
from feedback.forms import ReportForm
from feedback.schemas import ReportIn


@login_required
def report_new(request: HttpRequest) -> HttpResponse:
    form = ReportForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        item, _ = services.report_create(
            source=services.dogfood_form_source(),
            report=ReportIn(**form.cleaned_data),
            reporter=request.user,
        )
        messages.success(request, f"Report #{item.id} filed. Thank you.")
        return redirect("report_new")
    return render(request, "feedback/report_new.html", {"form": form}, status=422 if form.errors else 200)
