"""The JSON API: one NinjaAPI, routers from each app, errors in one shape.

Every error answer is ``{"error": "<one line>", "field": "<json path>"}``
(design.md, "Contracts"), whichever layer raised it.
"""

from typing import Any

from django.conf import settings
from django.core import signals
from django.core.exceptions import BadRequest, RequestDataTooBig, SuspiciousOperation
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.utils.log import log_response
from ninja import NinjaAPI
from ninja.errors import HttpError
from ninja.errors import ValidationError as NinjaValidationError

from core.api import EXTRA_COMPONENTS, ApiError
from exports.api import router as exports_router
from feedback.api import router as feedback_router
from labeling.compare.api import router as labeling_router


class FeedbackApi(NinjaAPI):
    """Adds hand-parsed request bodies to the OpenAPI document.

    Webhook bodies must be verified byte for byte before they are parsed, so
    their views read the raw body and the schema is attached here instead.
    """

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(*args, **kwargs)
        schema.setdefault("components", {}).setdefault("schemas", {}).update(EXTRA_COMPONENTS)
        return schema


api = FeedbackApi(
    title="Feedback ingestion API",
    version="1",
    description="Signed webhooks for product ratings and an API for dogfooding reports.",
    urls_namespace="api",
    docs_url="/docs",
    openapi_url="/openapi.json",
)


def error_response(request: HttpRequest, status: int, message: str, field: str = "") -> HttpResponse:
    payload: dict[str, Any] = {"error": message}
    if field:
        payload["field"] = field
    return api.create_response(request, payload, status=status)


@api.exception_handler(ApiError)
def on_api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return error_response(request, exc.status, exc.message, exc.field)


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return error_response(request, exc.status_code, str(exc))


@api.exception_handler(Http404)
def on_not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return error_response(request, 404, str(exc) or "not found")


@api.exception_handler(MultiPartParserError)
@api.exception_handler(BadRequest)
@api.exception_handler(SuspiciousOperation)
def on_bad_request(request: HttpRequest, exc: Exception) -> HttpResponse:
    """A request Django itself would refuse with a 400 gets a JSON 400 here, not a 500.

    A multipart body without a boundary, for one, is parsed (and found broken)
    only when the CSRF check of a session caller looks for a form token. A
    body over Django's upload limit is the contract's 413.
    """
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        response = error_response(request, 413, f"the request body is larger than the limit of {limit} bytes")
    elif isinstance(exc, MultiPartParserError):
        response = error_response(request, 400, f"the request body is not valid multipart form data: {exc}")
    else:
        response = error_response(request, 400, "the request is malformed")
    log_response("Bad request: %s", request.path, response=response, request=request, exception=exc)
    return response


@api.exception_handler(NinjaValidationError)
def on_validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    error = exc.errors[0]
    # ninja prefixes the location with where the value came from (query, path, body).
    loc = [part for part in error.get("loc", ()) if part not in ("query", "path", "body", "payload")]
    field = ".".join(str(part) for part in loc)
    return error_response(request, 422, f"{field}: {error.get('msg')}" if field else error.get("msg", "invalid"), field)


@api.exception_handler(Exception)
def on_unexpected_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    """A bug or an outage answers in the same shape, not with Django's HTML error page.

    Signalled and logged as Django does for the 500s it handles itself. A lost
    database connection is a 503: the sender should retry, and a retried
    webhook-id is stored once even when the first try had committed.
    """
    if settings.DEBUG_PROPAGATE_EXCEPTIONS:
        raise exc
    signals.got_request_exception.send(sender=None, request=request)
    if isinstance(exc, (OperationalError, InterfaceError)):
        response = error_response(request, 503, "the database is unavailable right now; retry later")
    else:
        response = error_response(request, 500, "internal error; it has been logged")
    log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request, exception=exc)
    return response


api.add_router("/v1", feedback_router)
api.add_router("/v1", labeling_router)
api.add_router("/v1", exports_router)
