"""Bearer tokens on the JSON API: the header read, the token checked, its use recorded.

core.auth reaches this through settings.API_TOKEN_AUTHENTICATOR, so the
ground floor authenticates tokens without importing the app that stores them.
"""

from django.http import HttpRequest

from core.api import ApiError
from feedback import selectors, services
from feedback.models import ApiToken


def authenticate_token(request: HttpRequest, *, scope: str) -> ApiToken:
    """The live token in the Authorization header that may use `scope`; ApiError 401 or 403 otherwise."""
    header = request.headers.get("Authorization", "")
    if not header:
        raise ApiError(401, "the Authorization header is missing; send 'Authorization: Bearer <token>'")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise ApiError(401, "the Authorization header must be 'Bearer <token>'")
    try:
        token = selectors.api_token_authenticate(raw_token=raw.strip())
    except selectors.TokenRefused as exc:
        raise ApiError(401, str(exc)) from None
    if scope not in token.scopes:
        have = ", ".join(sorted(token.scopes)) or "nothing"
        raise ApiError(403, f"this token may not use the {scope} API (it has: {have}); an admin can grant it")
    services.api_token_touch(token=token)
    return token
