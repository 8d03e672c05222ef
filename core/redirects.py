"""Following a ``next`` value a page posts back: only to a page of this site."""

from django.http import HttpRequest, HttpResponseRedirect
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme


def redirect_to_next(request: HttpRequest, target: str | None, *, fallback: str) -> HttpResponseRedirect:
    """Redirect to `target` when it is an absolute path on this host, else to `fallback` (a URL name).

    `target` is never handed to django.shortcuts.redirect(): that first tries
    it as a URL name, and a value such as "-1" or "abc" then raises
    NoReverseMatch (a 500) instead of being refused. A relative path would land
    under the URL that was posted to, and another host or scheme is an open
    redirect, so neither is followed.
    """
    target = target or ""
    is_local_path = target.startswith("/") and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    if is_local_path:
        return HttpResponseRedirect(target)
    return redirect(fallback)
