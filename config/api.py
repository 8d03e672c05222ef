"""The JSON API: one NinjaAPI, routers from each app, errors in one shape.

Every error answer is ``{"error": "<one line>", "field": "<json path>"}``
(design.md, "Contracts"), whichever layer raised it.
"""

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import HttpError
from ninja.errors import ValidationError as NinjaValidationError

from config.apitools import EXTRA_COMPONENTS, ApiError
from exports.api import router as exports_router
from feedback.api import router as feedback_router
from labeling.api import router as labeling_router


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


@api.exception_handler(NinjaValidationError)
def on_validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    error = exc.errors[0]
    # ninja prefixes the location with where the value came from (query, path, body).
    loc = [part for part in error.get("loc", ()) if part not in ("query", "path", "body", "payload")]
    field = ".".join(str(part) for part in loc)
    return error_response(request, 422, f"{field}: {error.get('msg')}" if field else error.get("msg", "invalid"), field)


api.add_router("/v1", feedback_router)
api.add_router("/v1", labeling_router)
api.add_router("/v1", exports_router)
