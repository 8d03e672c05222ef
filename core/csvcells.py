"""CSV cells that are safe to open in a spreadsheet (shared by every CSV the app writes)."""

# A spreadsheet runs a cell that starts with one of these as a formula (OWASP's
# "CSV injection" list: tab and carriage return too, since some programs skip them first).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value):
    """The value, with a leading ' if it is text a spreadsheet would run as a formula.

    Text comes from people and models (comments, category names, model output),
    so "=HYPERLINK(...)" must arrive as text. Numbers pass unchanged: -1 is a rating.
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
