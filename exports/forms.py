"""Forms of the dataset pages: they parse and check input, exports.datasets decides."""

import re
from datetime import date

from django import forms

from exports.formats import WRITERS
from exports.models import Dataset, Mode, Purpose
from exports.schemas import (
    EARLIEST_FILTER_DAY,
    FORMATS,
    LATEST_FILTER_DAY,
    NAME_PATTERN,
)
from labeling.models import Label
from labeling.review.services import LABEL_TAGS

FORMAT_LABELS = {
    "chat_jsonl": "Chat JSONL (messages ending in a corrected response or a thumbs-up output)",
    "preference_jsonl": "Preference JSONL (corrected response vs rated output)",
    "hints_jsonl": "Hints JSONL (context + coaching hint)",
    "eval_jsonl": "Eval JSONL (input, failure category, expected behaviour, tags)",
    "csv": "CSV (one row per item)",
    "parquet": "Parquet (one row per item)",
}


def format_label(name: str) -> str:
    """The form's wording for a format, else its writer's description (formats added later need no entry here)."""
    return FORMAT_LABELS.get(name) or f"{name} ({WRITERS[name].description})"


RATINGS = [("", "any rating"), ("up", "thumbs-up"), ("down", "thumbs-down"), ("none", "no rating (reports)")]
KINDS = [("rating", "Ratings"), ("report", "Reports")]
FILTER_FIELDS = (
    "categories",
    "areas",
    "verdicts",
    "tags",
    "rating",
    "kinds",
    "model_versions",
    "variants",
    "sources",
    "date_from",
    "date_to",
    "reviewed_only",
    "has_hint",
    "has_corrected_response",
)


def _day_in_range(day: date) -> None:
    if not EARLIEST_FILTER_DAY <= day <= LATEST_FILTER_DAY:
        raise forms.ValidationError(f"Enter a day from {EARLIEST_FILTER_DAY} to {LATEST_FILTER_DAY}.")


def _filter_day_field() -> forms.DateField:
    bounds = {"min": EARLIEST_FILTER_DAY.isoformat(), "max": LATEST_FILTER_DAY.isoformat()}
    return forms.DateField(
        required=False, validators=[_day_in_range], widget=forms.DateInput(attrs={"type": "date", **bounds})
    )


def _with_current(values: list[str], current: list[str]) -> list[tuple[str, str]]:
    """The values that exist, plus any a dataset stored that no item has any more."""
    return [(value, value) for value in sorted(set(values) | set(current))]


class DatasetForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        help_text="Lower-case letters, digits, '-' and '_'; the folder of its versions.",
        error_messages={"required": "Give the dataset a name."},
    )
    purpose = forms.ChoiceField(choices=Purpose.choices, widget=forms.RadioSelect, initial=Purpose.TRAIN)
    description = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 2}))
    formats = forms.MultipleChoiceField(
        choices=[(name, format_label(name)) for name in FORMATS],
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one format."},
    )
    # Rendered by templates/exports/_category_picker.html: searchable, grouped by area (see category_groups).
    categories = forms.TypedMultipleChoiceField(coerce=int, required=False, widget=forms.CheckboxSelectMultiple)
    areas = forms.TypedMultipleChoiceField(
        coerce=int,
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 4}),
        help_text="Items in these areas, in one of their categories or unsorted.",
    )
    verdicts = forms.MultipleChoiceField(
        choices=Label.Verdict.choices, required=False, widget=forms.CheckboxSelectMultiple
    )
    tags = forms.MultipleChoiceField(
        choices=[(tag, tag) for tag in LABEL_TAGS], required=False, widget=forms.CheckboxSelectMultiple
    )
    other_tags = forms.CharField(required=False, max_length=1000, help_text="Comma-separated.")
    rating = forms.ChoiceField(choices=RATINGS, required=False)
    kinds = forms.MultipleChoiceField(choices=KINDS, required=False, widget=forms.CheckboxSelectMultiple)
    model_versions = forms.MultipleChoiceField(required=False, widget=forms.SelectMultiple(attrs={"size": 4}))
    variants = forms.MultipleChoiceField(required=False, widget=forms.SelectMultiple(attrs={"size": 3}))
    sources = forms.MultipleChoiceField(required=False, widget=forms.SelectMultiple(attrs={"size": 3}))
    date_from = _filter_day_field()
    date_to = _filter_day_field()
    reviewed_only = forms.BooleanField(required=False, label="Reviewer-confirmed only (has a label)")
    has_hint = forms.BooleanField(required=False, label="Has a coaching hint")
    has_corrected_response = forms.BooleanField(required=False, label="Has a corrected response")

    def __init__(self, *args, choices: dict, dataset: Dataset | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        stored = dataset.filters if dataset is not None else {}
        self.category_groups = _category_groups(choices, stored_ids=stored.get("categories", []))
        self.fields["categories"].choices = [
            (category_id, name) for _, options in self.category_groups for category_id, name, _, _ in options
        ]
        open_areas = [(a.id, f"{a.name} ({a.get_status_display().lower()})") for a in choices["areas"]]
        # An area the dataset names that has since been merged stays selectable, so saving keeps it.
        offered = {area_id for area_id, _ in open_areas}
        self.fields["areas"].choices = open_areas + [
            (area_id, f"area #{area_id} (merged: exports follow the merge)")
            for area_id in stored.get("areas", [])
            if area_id not in offered
        ]
        self.fields["model_versions"].choices = _with_current(
            choices["model_versions"], stored.get("model_versions", [])
        )
        self.fields["variants"].choices = _with_current(choices["variants"], stored.get("variants", []))
        self.fields["sources"].choices = _with_current([s.slug for s in choices["sources"]], stored.get("sources", []))
        if dataset is not None and dataset.versions.exists():
            # The name is the folder of its versions and the purpose what they promised.
            for name in ("name", "purpose"):
                self.fields[name].disabled = True
                self.fields[name].help_text = "Fixed once a version exists."

    @classmethod
    def initial_for(cls, dataset: Dataset) -> dict:
        filters = dataset.filters
        known = set(LABEL_TAGS)
        initial = {
            "name": dataset.name,
            "purpose": dataset.purpose,
            "description": dataset.description,
            "formats": dataset.formats,
            **{name: filters.get(name) for name in FILTER_FIELDS if name in filters},
        }
        initial["tags"] = [tag for tag in filters.get("tags", []) if tag in known]
        initial["other_tags"] = ", ".join(tag for tag in filters.get("tags", []) if tag not in known)
        return initial

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not re.fullmatch(NAME_PATTERN, name):
            raise forms.ValidationError("Use lower-case letters, digits, '-' and '_', starting with a letter or digit.")
        return name

    def clean_other_tags(self) -> list[str]:
        tags = list(dict.fromkeys(part.strip() for part in self.cleaned_data["other_tags"].split(",") if part.strip()))
        if any(len(tag) > 200 for tag in tags):
            raise forms.ValidationError("A tag is at most 200 characters.")
        return tags

    def clean(self):
        data = super().clean()
        if data.get("date_from") and data.get("date_to") and data["date_from"] > data["date_to"]:
            self.add_error("date_to", "The end date is before the start date.")
        return data

    def filters(self) -> dict:
        """The cleaned filter values as DatasetFilters takes them."""
        data = self.cleaned_data
        return {
            "categories": data["categories"],
            "areas": data["areas"],
            "verdicts": data["verdicts"],
            "tags": list(dict.fromkeys(list(data["tags"]) + data["other_tags"])),
            "rating": data["rating"] or None,
            "kinds": data["kinds"],
            "model_versions": data["model_versions"],
            "variants": data["variants"],
            "sources": data["sources"],
            "date_from": data["date_from"].isoformat() if data["date_from"] else None,
            "date_to": data["date_to"].isoformat() if data["date_to"] else None,
            "reviewed_only": data["reviewed_only"],
            "has_hint": data["has_hint"],
            "has_corrected_response": data["has_corrected_response"],
        }

    def spec(self) -> dict:
        """The cleaned values as the dataset schema takes them."""
        data = self.cleaned_data
        return {
            "name": data["name"],
            "purpose": data["purpose"],
            "description": data["description"],
            "formats": data["formats"],
            "filters": self.filters(),
        }

    def add_refusal(self, field_path: str, message: str) -> None:
        """Show a service refusal on the field it names ("filters.sources[1]" -> sources)."""
        field = field_path.removeprefix("filters.").split("[")[0].split(".")[0]
        self.add_error(field if field in self.fields else None, message)


class DatasetPreviewForm(DatasetForm):
    """The builder's filters, purpose and formats as the page holds them while they are edited.

    The same fields and checks as saving, without the name and description
    (not chosen yet while filters are tried) and with no format required:
    the preview then counts items only.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        del self.fields["name"], self.fields["description"]
        self.fields["formats"].required = False


def _category_groups(choices: dict, *, stored_ids: list[int]) -> list[tuple[str, list[tuple[int, str, str, int]]]]:
    """(area name, [(id, name, status, items)]) for the picker; a stored category merged since stays choosable."""
    groups = [
        (area or "No area", [(c.id, c.name, c.get_status_display().lower(), c.size) for c in categories])
        for area, categories in choices["category_groups"]
    ]
    offered = {category_id for _, options in groups for category_id, _, _, _ in options}
    gone = [
        (category_id, f"category #{category_id}", "merged", 0) for category_id in stored_ids if category_id not in offered
    ]
    return groups + ([("Merged since the dataset was saved", gone)] if gone else [])


class ScheduleForm(forms.Form):
    cron = forms.CharField(
        required=False,
        max_length=100,
        label="Cron (UTC)",
        help_text="Five fields: minute hour day-of-month month day-of-week, e.g. '0 3 * * 1'. Empty: no schedule.",
    )
    mode = forms.ChoiceField(choices=Mode.choices, initial=Mode.SNAPSHOT)


class DiffForm(forms.Form):
    old = forms.TypedChoiceField(coerce=int, label="From")
    new = forms.TypedChoiceField(coerce=int, label="To")

    def __init__(self, *args, numbers: list[int], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name in ("old", "new"):
            self.fields[name].choices = [(n, f"v{n}") for n in numbers]
