"""Share bars drawn against the largest share listed, not against 100%."""

from django import template

register = template.Library()


@register.filter
def largest_share(rows, attribute: str = "down_share") -> float:
    """The largest `attribute` among the rows (100 when none has one): a meter's max.

    On a 0-100% scale a group with 4% of all thumbs-down, a lot among fifty, looks empty.
    """
    values = [getattr(row, attribute, None) for row in rows or ()]
    return max((value for value in values if value), default=100.0)
