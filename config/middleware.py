import io

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse


class RefuseNulInUrl:
    """Answer 400 to a URL holding a NUL character (%00), before any view sends it to the database.

    PostgreSQL refuses NUL in text, so a slug or a query value carrying one
    would otherwise fail deep inside a query as a 500.
    """

    MESSAGE = "the URL must not contain a NUL character (%00)"

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        query_values = (value for _, values in request.GET.lists() for value in values)
        if "\x00" in request.path or any("\x00" in value for value in query_values):
            if request.path.startswith("/api/"):
                return JsonResponse({"error": self.MESSAGE}, status=400)
            return HttpResponseBadRequest(self.MESSAGE)
        return self.get_response(request)


FORM_CONTENT_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def form_field_holding_nul(request: HttpRequest) -> str | None:
    """The name of the first field of a posted form (urlencoded or multipart) that holds NUL, else None.

    Names count as well as values, and so do the names of uploaded files.
    Only page forms are read here: the JSON API parses its own bodies and
    refuses NUL there naming the JSON field (core.api.read_json_body),
    and reading a body here first would change how the API reads it.
    """
    if request.method != "POST" or request.content_type not in FORM_CONTENT_TYPES or request.path.startswith("/api/"):
        return None
    for name, values in request.POST.lists():
        if "\x00" in name or any("\x00" in value for value in values):
            return name
    for name, files in request.FILES.lists():
        if "\x00" in name or any("\x00" in (upload.name or "") for upload in files):
            return name
    return None


class RefuseNulInFormBody:
    """Answer 400 to a posted form with a NUL character in a field, before any view stores it.

    PostgreSQL refuses NUL in text, so a category name, a description or a
    saved comparison's name carrying one would fail as a 500 on save; no form
    of the app has a use for it, so the whole form is refused with the field named.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        field = form_field_holding_nul(request)
        if field is None:
            return self.get_response(request)
        shown = field.replace("\x00", "\\x00")[:100]
        # Plain text: the field name comes from the sender and is not markup.
        return HttpResponseBadRequest(
            f"the form field '{shown}' must not contain a NUL character (\\x00)",
            content_type="text/plain; charset=utf-8",
        )


class BodyTooLarge(Exception):
    """More body arrived than the limit allows."""


class ChunkedBodyUnreadable(Exception):
    """A chunked body from a server that does not say where the body ends."""


def chunked_body_read(environ: dict, limit: int) -> bytes | None:
    """The whole body of a request sent with ``Transfer-Encoding: chunked``; None for any other request.

    Django reads a body only as far as Content-Length says, and a chunked
    request has none, so its body would read as empty (a signed webhook then
    "does not match"). gunicorn decodes the chunks and marks the end of the
    input (``wsgi.input_terminated``), so the stream can be read to its end.
    Raises BodyTooLarge once more than `limit` bytes arrive, having read no
    more than one byte past the limit.
    """
    if environ.get("CONTENT_LENGTH") or "chunked" not in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        return None
    if not environ.get("wsgi.input_terminated"):
        # A server that does not mark the end: reading on could wait forever.
        raise ChunkedBodyUnreadable
    stream = environ["wsgi.input"]
    parts, size = [], 0
    while size <= limit:
        part = stream.read(min(64 * 1024, limit + 1 - size))
        if not part:
            return b"".join(parts)
        parts.append(part)
        size += len(part)
    raise BodyTooLarge


def request_body_limit(request: HttpRequest) -> int:
    """The most a body may hold: the JSON API's limit on its paths, Django's form limit elsewhere."""
    if request.path.startswith("/api/"):
        return settings.WEBHOOK_MAX_BODY_BYTES
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE or settings.WEBHOOK_MAX_BODY_BYTES


def _refusal(request: HttpRequest, status: int, message: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"error": message}, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


class ReadChunkedBody:
    """Read a chunked request body whole (within the size limit), so every later reader sees it.

    The body is handed on as if it had come with a Content-Length: the API's
    views, Django's form parsing and the NUL check of posted forms all read it
    the usual way. Over the limit it is 413, as for a declared length.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = request_body_limit(request)
        try:
            body = chunked_body_read(request.META, limit)
        except BodyTooLarge:
            return _refusal(request, 413, f"the request body is larger than the limit of {limit} bytes")
        except ChunkedBodyUnreadable:
            return _refusal(request, 400, "this server cannot read a chunked request body; send a Content-Length")
        if body is not None:
            # What WSGIRequest builds from a declared length; request.body and
            # request.POST read from _stream, and size checks read CONTENT_LENGTH.
            request.META["CONTENT_LENGTH"] = str(len(body))
            request._stream = LimitedStream(io.BytesIO(body), len(body))
        return self.get_response(request)
