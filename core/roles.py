"""The two roles and the checks every reviewer page runs on the server.

`reviewer`: review, label, rename, merge, split, start cluster runs, create
exports. `admin`: all of that, plus sources, secrets, tokens, schedules and
deleting. Superusers count as admins.
"""

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

REVIEWER = "reviewer"
ADMIN = "admin"


def roles_of(user) -> set[str]:
    if not user.is_authenticated or not user.is_active:
        return set()
    if user.is_superuser:
        return {REVIEWER, ADMIN}
    # One query per request: the result is kept on the user object.
    if not hasattr(user, "_role_names"):
        user._role_names = set(user.groups.filter(name__in=(REVIEWER, ADMIN)).values_list("name", flat=True))
    roles = set(user._role_names)
    if ADMIN in roles:
        roles.add(REVIEWER)
    return roles


def is_reviewer(user) -> bool:
    return REVIEWER in roles_of(user)


def is_admin(user) -> bool:
    return ADMIN in roles_of(user)


def _role_required(check: Callable, role: str):
    def decorator(view):
        @login_required
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs):
            if not check(request.user):
                raise PermissionDenied(f"This page needs the {role} role.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


reviewer_required = _role_required(is_reviewer, REVIEWER)
admin_required = _role_required(is_admin, ADMIN)
