"""JSON values a database column can store as sent, and the path of the first that cannot.

Shared by every endpoint that takes JSON: a value is refused with its field
before it reaches a column that would refuse it with a 500.
"""

import math
import re
from typing import Any

from pydantic import ValidationError

# Escapes that decode to text no database column can hold: NUL (PostgreSQL
# refuses it in text and JSON) and UTF-16 surrogates (not encodable as UTF-8).
# Raw, they are invalid in a UTF-8 JSON body, so only escaped ones need looking for.
_UNSTORABLE_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")

# How deep arrays and objects may nest in a stored value. Real contexts nest
# a dozen levels at most; the pages, exports and the JSON encoder of the
# insert all walk a value recursively, and each has a ceiling (orjson's is 255).
MAX_JSON_DEPTH = 64
# Integers must fit in 64 signed bits, the widest most JSON readers take
# exactly (orjson, which writes the rows, among them); a larger one is
# refused, not rounded or cut.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def may_hold_unstorable_text(raw: bytes) -> bool:
    """Could this JSON body decode to a string no column can store? (Cheap: most bodies skip the text checks.)"""
    return _UNSTORABLE_ESCAPE.search(raw) is not None


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _shown(path: str) -> str:
    """A path fit to print in an error: no NUL, no lone surrogate."""
    return path.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\u0000")


def _number_error(value: int | float) -> str | None:
    if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
        return "integers must lie between -2^63 and 2^63-1; send a larger number as text"
    if type(value) is float and not math.isfinite(value):
        return "this number is too large to store; send it as text"
    return None


def _text_error(value: str) -> str | None:
    return None if _storable(value) else "text must not contain NUL (\\u0000) or unpaired surrogates"


def unstorable_error(value: Any, path: str = "", *, screen_text: bool = True) -> tuple[str, str] | None:
    """(message, json path) for the first part of `value`, in document order, that cannot be stored as sent.

    That is: arrays and objects nested deeper than MAX_JSON_DEPTH, an integer
    outside 64 bits, a number too large for a float (``1e999`` reads as
    infinity), and, with `screen_text`, a string or key holding NUL or an
    unpaired surrogate.

    This runs on every event of every batch, so it is written for speed: its
    own stack instead of recursion (a value may nest as deep as the JSON
    parser went, far deeper than the limit), and the path is spelled out only
    for the part at fault.
    """
    if type(value) is not list and type(value) is not dict:
        problem = _text_error(value) if screen_text and type(value) is str else _number_error(value)
        return None if problem is None else (f"{path or 'body'}: {problem}", path)
    # One entry per open array or object: the key it sits under and an iterator over its (key, value) pairs.
    stack: list[tuple[Any, Any]] = [(None, enumerate(value) if type(value) is list else iter(value.items()))]
    while stack:
        for key, item in stack[-1][1]:
            if screen_text and type(key) is str and not _storable(key):
                shown = _shown(_path_in(path, stack, key))
                return f"{shown}: keys must not contain NUL (\\u0000) or unpaired surrogates", shown
            kind = type(item)
            if kind is dict or kind is list:
                if len(stack) < MAX_JSON_DEPTH:
                    stack.append((key, enumerate(item) if kind is list else iter(item.items())))
                    break
                problem = f"arrays and objects may nest at most {MAX_JSON_DEPTH} levels deep"
            elif kind is str:
                problem = _text_error(item) if screen_text else None
            elif kind is int or kind is float:
                problem = _number_error(item)
            else:
                continue
            if problem is not None:
                where = _path_in(path, stack, key)
                return f"{where}: {problem}", where
        else:
            stack.pop()
    return None


def _path_in(path: str, stack: list[tuple[Any, Any]], key: Any) -> str:
    """The json path of `key` in the innermost open container of the walk."""
    return error_path((*(entry_key for entry_key, _ in stack[1:]), key), path)


def error_path(loc: tuple[Any, ...], prefix: str = "") -> str:
    """``("context", "messages", 0, "role")`` -> ``context.messages[0].role``."""
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def first_error(exc: ValidationError, prefix: str = "") -> tuple[str, str]:
    """The first problem as (one-line message, json path of the field)."""
    error = exc.errors(include_url=False)[0]
    field = error_path(tuple(error["loc"]), prefix)
    message = error["msg"]
    if error["type"] == "missing":
        message = "is required"
    return (f"{field}: {message}" if field else message), field
