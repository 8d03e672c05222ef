"""Bulk actions API: /api/v1/bulk-actions, the page's bulk actions for scripts.

Checks in a fixed order, each stopping at the first problem: who is asking
(a bearer token with the `review` scope, else a reviewer's session with its
CSRF token), the body, the action's own fields, then the selection (empty
422, more than 10,000 items 413, unknown items 404, items of another source
than the token's 403). A refused request changes nothing.
"""

from typing import Annotated, Literal

from django.http import HttpRequest
from ninja import Router, Status
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StringConstraints

from core.api import (
    ApiError,
    error_responses,
    json_body_schema,
    read_json_body,
    validate_model,
)
from core.auth import api_caller
from core.ids import id_parse
from feedback.models import ApiToken
from labeling.bulk.selectors import BULK_MAX_ITEMS, Selection, SelectionRefused
from labeling.bulk.services import BulkParams, BulkRefused, bulk_apply, refusal_of
from labeling.bulk.undo import bulk_undo
from labeling.models import BulkAction

router = Router(tags=["bulk actions"])

RowId = Annotated[StrictInt, Field(ge=1, le=2**63 - 1)]
Text = Annotated[str, StringConstraints(strict=True, max_length=200)]
# Leaves room for a refusal that names the count, rather than a parser error.
ITEMS_ACCEPTED = 10 * BULK_MAX_ITEMS


class SelectionFilter(BaseModel):
    """ "Select all matching": the items a page's filter lists."""

    model_config = ConfigDict(extra="forbid")

    scope: Literal["search", "category", "area"] = Field(
        description="search: the search filters; category: a category's items; area: an area's unsorted items."
    )
    id: RowId | None = Field(default=None, description="The category or area (scopes category and area).")
    params: dict[Text, Text] = Field(
        default_factory=dict,
        max_length=30,
        description="The page's filter fields, as in its query string: for search q, source, kind, rating, "
        "model_version, variant, category, area, status, review, date_from, date_to, mode, like; for a "
        "category rating, model_version, variant, assigned_by.",
    )


class BulkActionIn(BaseModel):
    """One bulk action on a selection: item ids, or a filter."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["move", "verdict", "tags_add", "tags_remove", "split", "pin", "queue"]
    items: list[RowId] | None = Field(
        default=None, max_length=ITEMS_ACCEPTED, description=f"Item ids, at most {BULK_MAX_ITEMS:,}."
    )
    filter: SelectionFilter | None = Field(default=None, description="Instead of `items`: every matching item.")
    category: RowId | None = Field(default=None, description="move: the proposed or confirmed category.")
    verdict: Literal["failure", "not_failure", "duplicate", "spam"] | None = Field(
        default=None, description="verdict: the verdict of your label on each item (a session only)."
    )
    tags: list[Text] = Field(default_factory=list, max_length=30, description="tags_add, tags_remove (a session only).")
    split: Literal["train", "eval", "none"] | None = Field(default=None, description="split (a session only).")
    dataset: RowId | None = Field(default=None, description="pin: the dataset whose exports take the items.")
    queue: Literal["double"] = Field(default="double", description="queue: the double-review queue.")


class BulkActionOut(BaseModel):
    id: int
    action: str
    items: int = Field(description="Items changed (those already as asked are not counted).")
    summary: str
    made_by: str
    created_at: str
    undone_at: str | None
    undo_url: str


class UndoOut(BaseModel):
    action: BulkActionOut
    restored: int
    kept: int = Field(description="Items changed again since the action: left as they are.")


def _out(action: BulkAction) -> dict:
    return {
        "id": action.id,
        "action": action.kind,
        "items": action.item_count,
        "summary": action.summary,
        "made_by": action.made_by,
        "created_at": action.created_at.isoformat(),
        "undone_at": action.undone_at.isoformat() if action.undone_at else None,
        "undo_url": f"/api/v1/bulk-actions/{action.id}/undo",
    }


def _refused(exc: BulkRefused | SelectionRefused) -> ApiError:
    refusal = refusal_of(exc)
    return ApiError(refusal.status, refusal.message, refusal.field)


@router.post(
    "/bulk-actions",
    response={201: BulkActionOut, **error_responses(400, 401, 403, 404, 409, 413, 422)},
    openapi_extra=json_body_schema(BulkActionIn),
    summary="Move, label, tag, split, pin or queue many items at once",
)
def bulk_action_create(request: HttpRequest):
    """One audited bulk action on up to 10,000 items, undoable with `undo_url`.

    Select with `items` (ids) or `filter` (what a page lists). Authenticate
    with a reviewer's session (send the CSRF token in `X-CSRFToken`) or
    ``Authorization: Bearer <token>`` with the ``review`` scope: a token
    acts only on its own source's items, and may move, pin and queue but not
    write labels (verdict, tags, split), which are a reviewer's judgement.
    """
    caller = api_caller(request, scope=ApiToken.Scope.REVIEW, what="bulk actions need")
    body = validate_model(BulkActionIn, read_json_body(request))
    if (body.items is None) == (body.filter is None):
        raise ApiError(422, "send either items (ids) or filter, not both and not neither", "items")
    if body.items is not None:
        selection = Selection(ids=tuple(body.items), source_id=caller.source_id)
    else:
        selection = Selection(
            scope=body.filter.scope,
            scope_id=body.filter.id,
            params=dict(body.filter.params),
            source_id=caller.source_id,
        )
    params = BulkParams(
        kind=body.action,
        category_id=body.category,
        verdict=body.verdict or "",
        tags=tuple(body.tags),
        split=body.split or "",
        dataset_id=body.dataset,
        queue=body.queue,
    )
    try:
        action = bulk_apply(
            params=params,
            selection=selection,
            actor=caller.user,
            made_by=caller.made_by,
            origin="api",
            token_source_id=caller.source_id,
        )
    except (BulkRefused, SelectionRefused) as exc:
        raise _refused(exc) from None
    return Status(201, _out(action))


@router.post(
    "/bulk-actions/{action_id}/undo",
    response={200: UndoOut, **error_responses(401, 403, 404, 409, 422)},
    summary="Undo a bulk action",
)
def bulk_action_undo(request: HttpRequest, action_id: int):
    """Put back what the action replaced, except on items changed again since (counted in `kept`).

    Whoever made the action may undo it (a token: what a token of its source
    made), and an admin.
    """
    caller = api_caller(request, scope=ApiToken.Scope.REVIEW, what="bulk actions need")
    if id_parse(action_id) is None:
        raise ApiError(404, "no such bulk action")
    try:
        result = bulk_undo(
            action_id=action_id, user=caller.user, made_by=caller.made_by, token_source_id=caller.source_id
        )
    except BulkRefused as exc:
        raise _refused(exc) from None
    return Status(200, {"action": _out(result.action), "restored": result.restored, "kept": result.kept})
