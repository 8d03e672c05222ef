"""JSON as every file of a version writes it: sorted keys, no spaces, the same bytes for the same value."""

import json
from datetime import UTC

import orjson

from exports.written import holds_float


def json_line(value) -> str:
    return _json_text(value) + "\n"


def _json_text(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def json_text(value) -> str:
    """_json_text(value), by orjson when it writes the same text (see json_bytes): tool-call arguments and results."""
    written = _by_orjson(value, orjson.OPT_SORT_KEYS)
    return _json_text(value) if written is None else written.decode("utf-8")


def _by_orjson(value, option: int, *, floats: bool | None = None) -> bytes | None:
    """orjson's bytes when they are json's (see json_bytes), else None."""
    if floats is None:
        floats = holds_float(value)
    if floats:
        return None
    try:
        return orjson.dumps(value, option=option)
    except (orjson.JSONEncodeError, TypeError):
        return None


def json_bytes(value, *, floats: bool | None = None) -> bytes:
    """json_line(value) as UTF-8 bytes, by orjson when it writes the same bytes (several times faster).

    orjson writes what json.dumps(ensure_ascii=False, sort_keys=True, compact)
    writes for strings, integers, booleans, None, lists and dicts with text
    keys; not for some floats (1e-05, which it writes 0.00001), so a value
    holding a float goes to json (`floats`: whether it does, when the caller
    knows). What orjson refuses (keys that are not text, integers beyond 64
    bits, unpaired surrogates) goes to json too, which writes or refuses it as before.
    """
    written = _by_orjson(value, _ORJSON_LINE, floats=floats)
    return json_line(value).encode("utf-8") if written is None else written


_ORJSON_LINE = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


def iso(moment) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
