"""Who calls the JSON API: a bearer token with its scope, or a reviewer's browser session.

Written once for every API that takes both. A token, when one is sent,
decides: a script with a stale token should hear so even from a browser that
also holds a session. Tokens are checked by the function named in
settings.API_TOKEN_AUTHENTICATOR (the app that stores them), which raises
ApiError 401/403 or returns the token.
"""

from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils.module_loading import import_string
from ninja.utils import check_csrf

from core.api import ApiError
from core.roles import is_admin, is_reviewer

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


@dataclass(frozen=True)
class Caller:
    user: Any  # the reviewer, for a session; None for a token
    token: Any  # the API token, for a token; None for a session
    is_admin: bool
    # Who asked, as audit trails and manifests say it: "rita", "api token fbk_abc… (product)".
    made_by: str

    @property
    def source_id(self) -> int | None:
        return self.token.source_id if self.token is not None else None


@cache
def _token_authenticator():
    return import_string(settings.API_TOKEN_AUTHENTICATOR)


def api_caller(request: HttpRequest, *, scope: str, what: str) -> Caller:
    """The caller of an API that `what` names ("datasets need the reviewer role"); ApiError 401/403 otherwise.

    A token must hold `scope`; a session needs the reviewer role and, on a
    method that writes, the CSRF token.
    """
    if request.headers.get("Authorization"):
        token = _token_authenticator()(request, scope=scope)
        return Caller(
            user=None, token=token, is_admin=False, made_by=f"api token {token.prefix}… ({token.source.name})"
        )
    user = request.user
    if not user.is_authenticated:
        raise ApiError(401, "log in, or send 'Authorization: Bearer <token>'")
    if not is_reviewer(user):
        raise ApiError(403, f"{what} the reviewer role")
    if request.method not in SAFE_METHODS:
        # The CSRF check parses a form body (multipart, urlencoded) to look for its
        # token. Reading the body first keeps a copy, so that parse cannot use up
        # the stream the JSON parser reads next (a RawPostDataException, a 500).
        request.body  # noqa: B018
        if check_csrf(request) is not None:
            raise ApiError(403, "the CSRF token is missing or wrong; send it in the X-CSRFToken header")
    return Caller(user=user, token=None, is_admin=is_admin(user), made_by=user.get_username())
