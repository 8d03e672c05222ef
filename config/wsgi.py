"""The WSGI application gunicorn serves (`gunicorn config.wsgi`).

Signed webhook deliveries (POST /api/v1/sources/<slug>/events) go to a
handler built with settings.WEBHOOK_MIDDLEWARE; every other request to the
one built with settings.MIDDLEWARE. Both run the same URLs and views.
"""

import os
import re

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# The path of feedback.api's receive_events (tests/core/test_webhook_handler.py checks that they agree).
WEBHOOK_PATH = re.compile(r"/api/v1/sources/[^/]+/events/?")


class WebhookHandler(WSGIHandler):
    """Django's handler with the webhook's shorter middleware list."""

    def load_middleware(self, is_async: bool = False) -> None:
        full = settings.MIDDLEWARE
        settings.MIDDLEWARE = settings.WEBHOOK_MIDDLEWARE
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = full


class Application:
    """Sends each request to the handler for its kind."""

    def __init__(self) -> None:
        self.pages = get_wsgi_application()  # sets Django up first
        self.webhooks = WebhookHandler()

    def __call__(self, environ, start_response):
        if environ.get("REQUEST_METHOD") == "POST" and WEBHOOK_PATH.fullmatch(environ.get("PATH_INFO", "")):
            return self.webhooks(environ, start_response)
        return self.pages(environ, start_response)


application = Application()
