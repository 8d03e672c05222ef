"""Forms of the reviewer pages: they parse and check input, services decide."""

from django import forms

from feedback.models import FeedbackItem
from labeling.models import Category, Label
from labeling.review.services import (
    CORRECTED_RESPONSE_MAX_LENGTH,
    HINT_MAX_LENGTH,
    LABEL_TAGS,
    OTHER_TAG_MAX_LENGTH,
    OTHER_TAGS_MAX,
)

CLOSED_CATEGORY = "That category does not exist or was merged or archived; pick an open one."


class LabelForm(forms.Form):
    verdict = forms.ChoiceField(
        choices=Label.Verdict.choices,
        widget=forms.RadioSelect,
        error_messages={"required": "Choose a verdict."},
    )
    category = forms.ModelChoiceField(
        queryset=Category.objects.open(),
        required=False,
        error_messages={"invalid_choice": CLOSED_CATEGORY},
    )
    severity = forms.ChoiceField(choices=[("", "—")] + FeedbackItem.Severity.choices, required=False)
    tags = forms.MultipleChoiceField(
        choices=[(tag, tag) for tag in LABEL_TAGS], required=False, widget=forms.CheckboxSelectMultiple
    )
    other_tags = forms.CharField(
        required=False,
        max_length=OTHER_TAGS_MAX * (OTHER_TAG_MAX_LENGTH + 2),
        help_text="Comma-separated.",
    )
    hint = forms.CharField(
        label="Coaching hint",
        required=False,
        max_length=HINT_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "What the model should have done"}),
    )
    corrected_response = forms.CharField(
        required=False,
        max_length=CORRECTED_RESPONSE_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 4, "class": "mono"}),
    )
    split = forms.ChoiceField(
        label="Intended split", choices=Label.Split.choices, initial=Label.Split.NONE, widget=forms.RadioSelect
    )

    def clean_other_tags(self) -> list[str]:
        raw = self.cleaned_data["other_tags"]
        tags = list(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))
        if len(tags) > OTHER_TAGS_MAX:
            raise forms.ValidationError(f"At most {OTHER_TAGS_MAX} other tags.")
        too_long = [tag for tag in tags if len(tag) > OTHER_TAG_MAX_LENGTH]
        if too_long:
            raise forms.ValidationError(f"Tags are at most {OTHER_TAG_MAX_LENGTH} characters: {too_long[0][:60]}…")
        return tags

    def label_data(self) -> dict:
        """The cleaned values as label_save() takes them."""
        data = self.cleaned_data
        return {
            "verdict": data["verdict"],
            "category": data["category"],
            "severity": data["severity"],
            "tags": list(data["tags"]) + [tag for tag in data["other_tags"] if tag not in data["tags"]],
            "hint": data["hint"],
            "corrected_response": data["corrected_response"],
            "split": data["split"],
        }

    @classmethod
    def initial_for(cls, *, label: Label | None, category_id: int | None) -> dict:
        if label is None:
            return {"category": category_id, "split": Label.Split.NONE}
        known = set(LABEL_TAGS)
        return {
            "verdict": label.verdict,
            "category": label.category_id,
            "severity": label.severity,
            "tags": [tag for tag in label.tags if tag in known],
            "other_tags": ", ".join(tag for tag in label.tags if tag not in known),
            "hint": label.hint,
            "corrected_response": label.corrected_response,
            "split": label.split,
        }


class DoubleReviewRequestForm(forms.Form):
    count = forms.IntegerField(label="Items", min_value=1, max_value=500, initial=20)
    category = forms.ModelChoiceField(
        queryset=Category.objects.open(),
        required=False,
        empty_label="Any category",
        error_messages={"invalid_choice": CLOSED_CATEGORY},
    )
