"""Shared pieces of the JSON API: the error shape, body parsing, schemas for hand-parsed bodies."""

import json
from typing import Any

from django.http import HttpRequest
from ninja import Schema
from pydantic import BaseModel, ValidationError

from core.storable import (
    MAX_JSON_DEPTH,
    first_error,
    may_hold_unstorable_text,
    unstorable_error,
)

# Schemas of bodies that views parse by hand; config.api adds them to the OpenAPI document.
EXTRA_COMPONENTS: dict[str, Any] = {}


class ApiError(Exception):
    """An error answer: status, a message a person understands, the field at fault."""

    def __init__(self, status: int, message: str, field: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


class ErrorOut(Schema):
    error: str
    field: str | None = None


ERROR_STATUSES = {
    400: "Malformed request (for example invalid JSON).",
    401: "Missing or bad signature or token.",
    403: "Not allowed.",
    404: "No such object.",
    409: "Conflict.",
    413: "Body or batch too large.",
    422: "Valid JSON that breaks a rule; `field` names the first bad field.",
    429: "Too many requests.",
}


def error_responses(*statuses: int) -> dict[int, Any]:
    return {status: ErrorOut for status in statuses}


def json_body_schema(*models: type[BaseModel], required: bool = True) -> dict[str, Any]:
    """An OpenAPI requestBody for a body parsed by hand (oneOf the models); optional with ``required=False``."""
    refs = []
    for model in models:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        EXTRA_COMPONENTS.update(schema.pop("$defs", {}))
        EXTRA_COMPONENTS[model.__name__] = schema
        refs.append({"$ref": f"#/components/schemas/{model.__name__}"})
    body_schema = refs[0] if len(refs) == 1 else {"oneOf": refs}
    return {"requestBody": {"required": required, "content": {"application/json": {"schema": body_schema}}}}


class _NotJson(ValueError):
    """A token Python's parser takes but JSON does not have."""


def _refuse_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON number")


def read_json_body(request: HttpRequest, body: bytes | None = None, *, screen_values: bool = True) -> Any:
    """The body as JSON, or a 400 that says what is wrong with it.

    A value no column can store as sent (text holding NUL or unpaired
    surrogates, an integer outside 64 bits, nesting deeper than
    MAX_JSON_DEPTH) is a 422 naming the field, unless the caller screens each
    part itself (`screen_values=False`), so that one bad part fails only itself.
    """
    raw = request.body if body is None else body
    if not raw.strip():
        raise ApiError(400, "the request body is empty; expected JSON")
    try:
        # Strictly UTF-8: json.loads(bytes) would also take UTF-16 and UTF-32.
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the request body is not UTF-8 text") from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except _NotJson as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        # Deeper than the parser can follow, so far deeper than any part may nest.
        raise ApiError(
            400, f"the request body nests arrays and objects too deeply; at most {MAX_JSON_DEPTH} levels are allowed"
        ) from None
    except ValueError:  # Python refuses to read an integer of more than 4300 digits
        raise ApiError(400, "the request body holds a number too long to read") from None
    if screen_values:
        found = unstorable_error(data, screen_text=may_hold_unstorable_text(raw))
        if found is not None:
            raise ApiError(422, *found)
    return data


def validate_model(model: type[BaseModel], data: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        message, field = first_error(exc)
        raise ApiError(422, message, field) from None
