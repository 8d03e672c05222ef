from django import template

register = template.Library()


@register.filter
def pairs(mapping) -> list[tuple[str, object]]:
    """A dict's (key, value) pairs, for templates.

    Templates must not loop over ``mapping.items``: Django's lookup tries the
    key "items" before the dict method, and stored dicts hold such keys (a
    cluster run records the item count before and after; a category or a
    scrub pattern may be named so).
    """
    return list(mapping.items()) if isinstance(mapping, dict) else []


@register.filter
def change_text(value) -> str:
    """One audit detail as a person reads it: ``before → after``, a name, or the value."""
    if isinstance(value, dict):
        if "before" in value or "after" in value:
            return f"{value.get('before') or '–'} → {value.get('after') or '–'}"
        if "name" in value:
            return str(value["name"])
        return ", ".join(f"{key} {change_text(inner)}" for key, inner in value.items())
    if isinstance(value, list):
        return ", ".join(change_text(inner) for inner in value)
    return str(value)
