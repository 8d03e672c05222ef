from core.roles import is_admin, is_reviewer


def roles(request):
    user = getattr(request, "user", None)
    if user is None:
        return {}
    return {"is_reviewer": is_reviewer(user), "is_admin": is_admin(user)}
