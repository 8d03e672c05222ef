"""The templates themselves: what Django would print instead of reading."""

import re
from pathlib import Path

from django.conf import settings

TEMPLATES = sorted(Path(settings.BASE_DIR, "templates").rglob("*.html"))
# A {# #} comment ends on its own line; one that runs on is printed to the page, braces and all.
UNCLOSED_COMMENT = re.compile(r"\{#(?!.*#\})")


def test_there_are_templates_to_check():
    assert len(TEMPLATES) > 20


def test_no_short_comment_runs_over_a_line():
    unclosed = [
        f"{path.relative_to(settings.BASE_DIR)}:{number}"
        for path in TEMPLATES
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if UNCLOSED_COMMENT.search(line)
    ]
    assert unclosed == [], "use {% comment %} for a comment over several lines"
