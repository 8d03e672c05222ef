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
