from django import template

from labeling.review.selectors import item_evidence, item_snippet

register = template.Library()


@register.filter
def snippet(item) -> str:
    """An item's title or comment as lists show it: secrets and personal data replaced by placeholders."""
    return item_snippet(item)


@register.filter
def evidence(item) -> str:
    """For an item that says nothing itself (no title, no comment): the evidence it was sorted by, scrubbed;
    empty when a list did not load the item's context, so it costs no query."""
    return item_evidence(item)
