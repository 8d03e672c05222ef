from django import forms

from config.ids import is_id
from feedback.models import FeedbackItem
from labeling.models import Label
from labeling.selectors import SearchFilters


class SearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Text")
    source = forms.CharField(required=False, max_length=100)
    kind = forms.ChoiceField(required=False, choices=[("", "any kind"), *FeedbackItem.Kind.choices])
    rating = forms.ChoiceField(required=False, choices=[("", "any rating"), ("down", "down"), ("up", "up")])
    model_version = forms.CharField(required=False, max_length=100)
    variant = forms.CharField(required=False, max_length=100)
    category = forms.CharField(required=False, max_length=20)
    area = forms.CharField(required=False, max_length=20)
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *FeedbackItem.Status.choices])
    review = forms.ChoiceField(
        required=False,
        choices=[("", "reviewed or not"), ("none", "not reviewed"), ("any", "reviewed"), *Label.Verdict.choices],
    )
    date_from = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("date_from") and cleaned.get("date_to") and cleaned["date_from"] > cleaned["date_to"]:
            self.add_error("date_to", "The end date is before the start date.")
        category = cleaned.get("category") or ""
        if category and category != "none" and not is_id(category):
            self.add_error("category", "Pick a category from the list.")
        area = cleaned.get("area") or ""
        if area and area != "none" and not is_id(area):
            self.add_error("area", "Pick an area from the list.")
        return cleaned

    def filters(self) -> SearchFilters:
        return SearchFilters(**{name: self.cleaned_data.get(name) or (None if name.startswith("date") else "") for name in self.fields})
