from django import template

from labeling.review.selectors import item_snippet

register = template.Library()


@register.filter
def snippet(item) -> str:
    """An item's title or comment as lists show it: secrets and personal data replaced by placeholders."""
    return item_snippet(item)
