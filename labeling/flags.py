"""Flags on items that another app raises (the rollout checks'), where labeling's pages show them.

Labeling offers the places: a review queue per flag, a search filter, and a
family of rows in the model-version comparison. It never imports the app
that fills them: that app registers an `ItemFlags` in its AppConfig.ready()
(rollouts does), and labeling asks `item_flags()`. With none registered the
places stay empty.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists

from feedback.models import FeedbackItem


@dataclass(frozen=True)
class ItemFlags:
    # Every flag a filter may name.
    names: Callable[[], list[str]]
    # A flag's title, or None when there is no such flag.
    title: Callable[[str], str | None]
    # An Exists() over FeedbackItem: the item has this flag ("any": any flag), standing or only pending.
    flagged: Callable[..., Exists]
    # For each comparison's parameters, its rows per flag (tested like the categories, as a family of their own).
    comparison_rows: Callable[[Sequence[Any]], list[list[Any]]]
    # Those rows as the comparison's JSON answer carries them.
    rows_json: Callable[[list[Any]], list[dict]]


NONE = ItemFlags(
    names=list,
    title=lambda name: None,
    flagged=lambda *, name, pending_only=False: Exists(FeedbackItem.objects.none()),
    comparison_rows=lambda params: [[] for _ in params],
    rows_json=lambda rows: [],
)
_registered = NONE


def register(flags: ItemFlags) -> None:
    global _registered
    _registered = flags


def item_flags() -> ItemFlags:
    return _registered
