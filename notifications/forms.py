from django import forms

from notifications.models import SUBSCRIBABLE, Destination


class DestinationForm(forms.Form):
    # Lengths are checked by the service, which says how long is too long.
    name = forms.CharField(required=False, strip=False)
    kind = forms.ChoiceField(choices=Destination.Kind.choices, initial=Destination.Kind.WEBHOOK)
    url = forms.CharField(required=False, strip=False, label="URL")
    events = forms.MultipleChoiceField(
        required=False, choices=SUBSCRIBABLE, widget=forms.CheckboxSelectMultiple, initial=[SUBSCRIBABLE[0][0]]
    )

    def refuse(self, field: str, message: str) -> None:
        self.add_error(field if field in self.fields else None, message)


class DestinationEditForm(forms.Form):
    name = forms.CharField(required=False, strip=False)
    events = forms.MultipleChoiceField(required=False, choices=SUBSCRIBABLE, widget=forms.CheckboxSelectMultiple)
    is_active = forms.BooleanField(required=False, label="Active")

    def refuse(self, field: str, message: str) -> None:
        self.add_error(field if field in self.fields else None, message)
