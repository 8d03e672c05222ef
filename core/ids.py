"""Reading a database id from text a person or a browser sent (a query value, a form field).

One rule for every page and API, so that no view trips over the ways
``str.isdigit()`` and ``int()`` disagree:

- ``"²".isdigit()`` is true but ``int("²")`` raises, and ``int("٣")`` (an
  Arabic-Indic three) succeeds: only ASCII digits are ids;
- ``int()`` refuses strings of more than 4,300 digits, and a number past a
  bigint makes the database driver raise instead of finding nothing.
"""

MAX_ID = 2**63 - 1  # the largest bigint: Django's primary keys are at most this
_MAX_ID_DIGITS = len(str(MAX_ID))


def id_parse(value) -> int | None:
    """The id that `value` spells (ASCII digits, 1..MAX_ID, surrounding spaces allowed), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 < value <= MAX_ID else None
    if not isinstance(value, str):
        return None
    value = value.strip()
    # The length check comes first: int() of a very long string is slow or raises.
    if not value or len(value) > _MAX_ID_DIGITS or not (value.isascii() and value.isdigit()):
        return None
    number = int(value)
    return number if 0 < number <= MAX_ID else None


def is_id(value) -> bool:
    return id_parse(value) is not None
