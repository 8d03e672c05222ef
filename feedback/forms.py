from django import forms

from feedback.models import FeedbackItem


class ReportForm(forms.Form):
    title = forms.CharField(max_length=300, help_text="One line: what went wrong.")
    what_happened = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), max_length=100_000)
    expected = forms.CharField(
        label="What was expected", widget=forms.Textarea(attrs={"rows": 3}), max_length=100_000, required=False
    )
    severity = forms.ChoiceField(choices=FeedbackItem.Severity.choices, initial=FeedbackItem.Severity.MEDIUM)
    model_version = forms.CharField(max_length=100, required=False)
    transcript = forms.CharField(
        label="Transcript or log",
        widget=forms.Textarea(attrs={"rows": 8, "class": "mono"}),
        max_length=100_000,
        required=False,
    )
