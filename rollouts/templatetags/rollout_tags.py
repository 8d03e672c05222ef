"""What other apps' pages need of the rollout checks without a query of their own.

The item page, the compare page and the overview load the flags after they
render (htmx, from rollouts.urls), so their query counts stay as they were;
the search form lists the built-in checks from code.
"""

from urllib.parse import urlencode

from django import template

from rollouts import selectors
from rollouts.checks import CHECKS, CUSTOM_PREFIX

register = template.Library()


@register.simple_tag
def rollout_check_choices(current=""):
    """(name, title) of the built-in checks, and the custom check a search names now (no query)."""
    choices = [(check.name, check.title) for check in CHECKS]
    if current and current.startswith(CUSTOM_PREFIX):
        choices.append((current, selectors.check_title(current)))
    return choices


@register.simple_tag
def rate_of(row, check_name):
    """A row's rate for one check, in percent with one decimal ("–" without rollouts)."""
    rate = row.rate(check_name)
    return "–" if rate is None else f"{100 * rate:.1f}%"


@register.filter
def urlencode_query(query):
    """A dict as a query string (the compare page's parameters for its partials)."""
    return urlencode(query) if isinstance(query, dict) else ""


@register.filter
def call_anchor(location):
    """The id of a call's anchor in the transcript ("tool_calls.3" -> "call-tool_calls-3")."""
    return selectors.call_anchor(str(location))
