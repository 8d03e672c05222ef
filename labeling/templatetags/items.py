from django import template

from labeling.review.selectors import item_snippet

register = template.Library()


@register.filter
def snippet(item) -> str:
    """An item's title or comment as lists show it: secrets and personal data replaced by placeholders."""
    return item_snippet(item)


@register.filter
def evidence(item) -> str:
    """For an item that says nothing itself (no title, no comment): the evidence its vector stands for (a tool
    error, the end of the output), scrubbed. Empty when a list did not load that text, so it costs no query."""
    if item.title or item.comment or "embed_text" in item.get_deferred_fields():
        return ""
    return item_snippet(item, or_embedded_text=True)
