import dataclasses

from django import forms

from core.ids import id_parse, is_id
from feedback.models import FeedbackItem
from labeling.flags import item_flags
from labeling.models import Label
from labeling.search.keyset import cursor_parse
from labeling.search.meaning import QUERY_MAX_CHARS
from labeling.search.selectors import SearchFilters

WORDS = "words"
MEANING = "meaning"
# Each word is a substring filter on the text; a sentence is what meaning is for.
WORDS_MAX_CHARS = 200


class SearchForm(forms.Form):
    # Its length is checked in clean(): the limit depends on the mode.
    q = forms.CharField(required=False, label="Text", widget=forms.TextInput(attrs={"maxlength": QUERY_MAX_CHARS}))
    mode = forms.ChoiceField(
        required=False, label="Search by", choices=[(WORDS, "words"), (MEANING, "meaning")], widget=forms.RadioSelect
    )
    # "More like this": the item whose neighbours to list (search by meaning).
    like = forms.CharField(required=False, max_length=40, label="More like")
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
    flag = forms.CharField(required=False, max_length=60, label="Rollout flag")
    # Keyset page links (labeling.search.keyset): the item a page starts after or ends before.
    after = forms.CharField(required=False, max_length=60, widget=forms.HiddenInput)
    before = forms.CharField(required=False, max_length=60, widget=forms.HiddenInput)

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
        flag = cleaned.get("flag") or ""
        if flag and flag != "any":
            if flag not in item_flags().names():
                self.add_error("flag", "Pick a rollout check from the list.")
        like = cleaned.get("like") or ""
        if like and not is_id(like):
            self.add_error("like", "Pick an item by its number, as on its page (#123).")
        for name in ("after", "before"):
            if cleaned.get(name) and cursor_parse(cleaned[name]) is None:
                self.add_error(name, "This page link is not valid; start again from the newest page.")
        text = cleaned.get("q") or ""
        if self.by_meaning():
            if len(text) > QUERY_MAX_CHARS and not like:
                self.add_error(
                    "q",
                    f"A text to search by meaning can be at most {QUERY_MAX_CHARS:,} characters (this one has "
                    f"{len(text):,}): the model reads only the first few hundred words, so describe the problem "
                    "in a sentence or two.",
                )
        elif len(text) > WORDS_MAX_CHARS:
            self.add_error(
                "q",
                f"Search words can be at most {WORDS_MAX_CHARS} characters (these have {len(text):,}); "
                "to search with a longer text, search by meaning.",
            )
        return cleaned

    def by_meaning(self) -> bool:
        """A search by meaning: asked for, or a "more like this" (which only meaning answers)."""
        data = getattr(self, "cleaned_data", {})
        return data.get("mode") == MEANING or bool(data.get("like"))

    def like_item_id(self) -> int | None:
        return id_parse(self.cleaned_data.get("like") or "")

    def cursors(self) -> dict:
        """`after` and `before` of a page link, parsed (see labeling.search.keyset)."""
        return {name: cursor_parse(self.cleaned_data[name]) for name in ("after", "before") if self.cleaned_data.get(name)}

    def filters(self) -> SearchFilters:
        # Only the fields that filter: the mode and "more like" say how to rank, not what to keep.
        names = {field.name for field in dataclasses.fields(SearchFilters)}
        return SearchFilters(
            **{
                name: self.cleaned_data.get(name) or (None if name.startswith("date") else "")
                for name in self.fields
                if name in names
            }
        )
