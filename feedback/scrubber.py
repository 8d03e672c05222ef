"""Find secrets and personal data in text and replace them with typed placeholders.

    >>> scrub("export DB_PASSWORD=hunter2x; mail alice@example.com from 10.0.3.17").text
    'export DB_PASSWORD=[SECRET:password]; mail [EMAIL] from [IP]'

Feedback on a coding agent carries whatever the user had open: keys in env
dumps, passwords in config files, tokens in logs, e-mail addresses, home
directories. None of it may reach a dataset, so ingestion scrubs every text and
exports re-check with `find_unscrubbed` and fail a version on any hit.

Placeholders: `[SECRET:<kind>]` for credentials, `[EMAIL]`, `[PHONE]`, `[IP]`,
`[PATH_HOME]` for the home-directory prefix of a path (`/home/alice/src/x.py`
becomes `[PATH_HOME]/src/x.py`, so the rest of a stack trace stays readable),
and `[CUSTOM:<name>]` for the (name, regex) pairs a source adds.

How it works: every row of `PATTERNS` is a precompiled regex, tried in table
order (most specific first), with an optional Python `check` on each candidate
(digit counts, version-like contexts, code-versus-config heuristics). A row
runs only when one of its cheap lowercase trigger substrings occurs in the
text, so a typical short comment runs a handful of regexes; one Aho-Corasick
pass (pyahocorasick) finds every trigger at once. Results for texts up to
1,024 characters are kept in bounded LRU caches, since exports scrub and
re-check the same roles, prompts and tool names on every row. Matches are
collected against the original text; a match that overlaps an earlier row's
match, or a placeholder already in the text, is dropped. That makes scrubbing
idempotent and keeps `find_unscrubbed` on scrubbed output empty: a placeholder
can never be matched again. Regexes start with a literal or a plain character
class wherever possible (see `_starts_token` and `_caseless`): that lets the
regex engine skip ahead, which made long texts about 3x faster.

Why not a library: detect-secrets 1.5.0 (the usual choice) is a line scanner
that reports secret values, not spans; its private-key rule matches only the
BEGIN line, its GitHub rule yields the `ghp` prefix group, it has no e-mail,
phone or home-path rules, pulls in requests, and scanned about 1,700 short
texts/s here. Presidio needs spaCy models. The regexes below borrow the token
shapes that detect-secrets and gitleaks document.

Not covered: person names in free prose (that needs NER); secrets with no
recognisable shape and no telling key name (a bare random string).
"""

from __future__ import annotations

import bisect
import ipaddress
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import ahocorasick

__all__ = [
    "PATTERNS",
    "Pattern",
    "ScrubMemo",
    "ScrubResult",
    "find_unscrubbed",
    "find_unscrubbed_in",
    "scrub",
    "scrub_json",
    "validate_custom_patterns",
    "validate_pattern",
]

_DIGITS = tuple("0123456789")


@dataclass(frozen=True)
class Pattern:
    """One row of the table: what to find and what to put in its place.

    `group` names the part of the match that is replaced (0: all of it), so an
    assignment keeps its key: `password=[SECRET:password]`. `triggers` are
    lowercase substrings one of which must occur in the text for the row to
    run (empty: always run). `check` rejects a candidate match in Python where
    a regex alone would be unreadable (digit counts, version-like contexts).

    Invariant: a match and what its check reads stay within one line (the
    private-key block aside, which no replacement can create). `scrub`
    relies on it to re-scan only the lines it changed.
    """

    name: str
    placeholder: str
    regex: str
    flags: int = 0
    triggers: tuple[str, ...] = ()
    group: str | int = 0
    check: Callable[[re.Match[str]], bool] | None = None
    compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)
    trigger_set: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled", re.compile(self.regex, self.flags))
        object.__setattr__(self, "trigger_set", frozenset(self.triggers))

    @property
    def label(self) -> str:
        """The placeholder without brackets: the key used in counts."""
        return self.placeholder[1:-1]


@dataclass(frozen=True)
class ScrubResult:
    text: str
    counts: dict[str, int]  # placeholder label ("EMAIL", "SECRET:github_token") -> replacements

    @property
    def total(self) -> int:
        return sum(self.counts.values())


# --- checks used by the table ------------------------------------------------


Check = Callable[[re.Match[str]], bool]


def _starts_token(extra: str = "") -> Check:
    """The match begins a token: no word character (nor one of `extra`) right before it.

    A check rather than a leading \\b or lookbehind in the regex: those stop
    the regex engine from jumping straight to a literal prefix like `ghp_`,
    which made each such row cost a full attempt at every character.
    """

    def check(m: re.Match[str]) -> bool:
        start = m.start()
        if start == 0:
            return True
        before = m.string[start - 1]
        return not (before.isalnum() or before == "_" or before in extra)

    return check


def _all(*checks: Check) -> Check:
    return lambda m: all(check(m) for check in checks)


def _digit_count(s: str) -> int:
    return sum(c.isdigit() for c in s)


def _has_letter_and_digit(m: re.Match[str]) -> bool:
    token = m.group(0)
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


# Words that sit where a secret would but are not one: types, nulls, templates.
_NOT_SECRETS = frozenset(
    """
    none null nil true false undefined str string int integer bool boolean bytes any
    object optional secret secrets password passwords passwd token tokens secretstr
    required hidden redacted masked changeme example placeholder empty missing invalid
    expired revoked unset default environ getenv dummy notset omitted sensitive
    your_password your_token your_api_key your-api-key api_key apikey secret_key
    void text number date email file search url tel color
    """.split()
)
_NOT_SECRET_START = tuple("$%{<[(*#&\\/~+!")  # templates, types, masks, paths, unary operators
_MASK_CHARS = frozenset("*xX•.-_#?")
_DOTTED_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)+")  # self.token, a?.b
_CAMEL_TYPE = re.compile(r"[A-Z][a-z]+(?:[A-Z][a-z]+)*\d{0,2}")
_FIELD_NAME = re.compile(r"_*[a-z]+(?:[_-][a-z0-9]+)+")  # access_token, set-password
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_NUMBER = re.compile(r"[\d_.]+")
_KEYWORD_PARTS = ("token", "secret", "key", "pass", "auth")
_WORD_LIKE = re.compile(r"[A-Za-z_$][\w$-]*")  # hunter2, messageId, re-exchanging: needs a config context
_CAMEL_VARIABLE = re.compile(r"[a-z]+(?:[A-Z][a-z]+)+")  # messageId, overEvery
_ENV_KEY = re.compile(r"[A-Z][A-Z0-9_]*")


def _plausible_secret_value(value: str, *, delimited: bool) -> bool:
    """Could this string be a credential, rather than code, a type or a template?

    `delimited` values came in quotes (or as a JSON string, or between XML
    tags), so a plain word is taken at face value; bare values must look less
    like code before they count.
    """
    if len(value) < 4 or value.startswith(_NOT_SECRET_START):
        return False
    low = value.lower()
    if low.rstrip("?!") in _NOT_SECRETS or set(value) <= _MASK_CHARS or _NUMBER.fullmatch(value):
        return False
    if "${" in value or "{{" in value or "%(" in value:
        return False
    if delimited:
        # `"token": "access_token"` names a field, `password:"PasswordFlow"` a
        # class, `allPass:"overEvery"` a method; `"password": "hunter2"` is one.
        if _CAMEL_TYPE.fullmatch(value) or _CAMEL_VARIABLE.fullmatch(value):
            return False
        return not (_FIELD_NAME.fullmatch(value) and any(k in low for k in _KEYWORD_PARTS))
    if _DOTTED_IDENTIFIER.fullmatch(value) or _CAMEL_TYPE.fullmatch(value):
        return False
    # `token=dep_token0`, `self._password = raw_password`: a variable, not a literal.
    return not (_IDENTIFIER.fullmatch(value) and ("_" in value or any(k in low for k in _KEYWORD_PARTS)))


def _looks_random(value: str) -> bool:
    return len(value) >= 16 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _line_start_before(text: str, pos: int) -> bool:
    """Only indentation, a YAML list dash or `export ` between the line start and pos."""
    line_start = text.rfind("\n", 0, pos) + 1
    prefix = text[line_start:pos].strip(" \t-\"'")
    return prefix in ("", "export", "set")


def _line_end_after(text: str, pos: int) -> bool:
    """Nothing but blanks or a comment between pos and the end of its line."""
    line_end = text.find("\n", pos)
    rest = text[pos : line_end if line_end >= 0 else len(text)].strip()
    return rest == "" or rest.startswith("#")


def _keyword_starts_a_word(key: str, at: int) -> bool:
    # `DB_PASSWORD`, `db.password`, `dbPassword` but not `compass`, `bypass`.
    if at == 0:
        return True
    before, first = key[at - 1], key[at]
    return before in "_.-" or ((before.islower() or before.isdigit()) and first.isupper())


_KEY_CHARS = frozenset(string.ascii_letters + string.digits + "_.-")


def _assignment_check(*, digits_allowed: bool) -> Check:
    def check(m: re.Match[str]) -> bool:
        text = m.string
        # The regex starts at the keyword (fast); the key is the identifier
        # around it: DB_PASSWORD, settings.api_key, --token, dbPassword.
        key_start = m.start("kw")
        while key_start and text[key_start - 1] in _KEY_CHARS:
            key_start -= 1
        key = text[key_start : m.end("kw")]
        if not key.lstrip("-")[:1].isalpha() and not key.lstrip("-").startswith("_"):
            return False
        if key_start and text[key_start - 1] in "[/":
            return False  # x[password], /api/token: an index or a path
        if not _keyword_starts_a_word(key, m.start("kw") - key_start):
            return False
        value = m.group("value")
        sep = m.group("sep")
        if sep is None and not (key.startswith("--") and (m.group("sp1") or m.group("sp2"))):
            return False  # only a long command-line flag takes its value after a blank
        if sep == ">":
            # XML element: <password>hunter2</password>
            return (
                key_start > 0
                and text[key_start - 1] == "<"
                and text.startswith("</", m.end("value"))
                and _plausible_secret_value(value, delimited=True)
            )
        if value.isdigit() and not (digits_allowed and len(value) >= 6):
            return False  # max_tokens: 512, password_min_length = 8
        if m.group("q") is not None:
            return _plausible_secret_value(value, delimited=True)
        after = text[m.end("value") : m.end("value") + 1]
        if after in ("(", "[", ".") and not text.startswith(". ", m.end("value")):
            return False  # a call, an index, an attribute: code, not a literal
        if not _plausible_secret_value(value, delimited=False):
            return False
        if not _WORD_LIKE.fullmatch(value) or _looks_random(value):
            return True  # s3cr3t!, p@ss-w0rd, a long random string
        # A bare word (hunter2, sunflower) could as well be a variable: it is
        # a secret only where configs and people write literals. Code assigns
        # variables: `token = error62`, `f(password=hunter2)`, `{token: messageId}`.
        end = m.end("value")
        before = text[key_start - 1] if key_start else "\n"
        attached_colon = sep == ":" and not m.group("sp1")  # not `a ? token : anchor2`
        env_style = _ENV_KEY.fullmatch(key) is not None and sep == "=" and not m.group("sp1") and not m.group("sp2")
        yaml_line = attached_colon and _line_start_before(text, key_start) and _line_end_after(text, end)
        prose = (
            attached_colon
            and bool(m.group("sp2"))
            and before in " \t\n"
            and after in ("", " ", "\n", ".", "!")
            and any(c.isdigit() for c in value)  # `password: hunter2 please`, not `password: must be`
        )
        return (
            ((yaml_line or prose) and not _CAMEL_VARIABLE.fullmatch(value))
            or (env_style and after in ("", " ", "\n", "\r", "\t", "&", ";"))  # .env, `export X=...;`
            or (before in "?&" and after in ("", "&", "#", " ", "\n"))  # query string
            or key.startswith("--")  # --password hunter2
        )

    return check


def _caseless(*words: str) -> str:
    """A case-insensitive alternation of words that starts with a plain character class.

    The regex engine skips straight to candidate positions only when a pattern
    starts with a literal or a case-sensitive class; with (?i) letters first it
    tries every position. `_caseless("token", "pwd")` gives
    `[PpTt](?i:(?<=t)oken|(?<=p)wd)`: same matches, about 5x faster on long text.
    """
    firsts = sorted({w[0].lower() for w in words})
    first_class = "".join(c + c.upper() for c in firsts)
    body = "|".join(f"(?<={w[0].lower()}){w[1:]}" for w in words)
    return f"[{first_class}](?i:{body})"


def _assignment_regex(keywords: str) -> str:
    # keyword (last in its key), optional closing quote, separator, optional
    # opening quote, the value; `(?(q)...)` makes a quoted value run to its quote.
    return (
        r"(?P<kw>" + keywords + r")(?![\w.-])"
        r"\\?[\"']?"
        r"(?P<sp1>[ \t]*)(?:(?P<sep>=>|:=|[:=>])(?![=>]))?(?P<sp2>[ \t]*)"
        r"(?:\\?(?P<q>[\"']))?"
        r"(?P<value>(?(q)[^\"'\s\\(){}<>,;]{1,300}|[^\s\"'`,;&(){}\[\]<>\\]{1,300}))"
        r"(?(q)\\?(?P=q))"
    )


_ASSIGNMENT_KEYWORDS = {
    "password_assignment": _caseless(r"pass(?:word|wd|phrase|code)?", "pwd"),
    "secret_assignment": _caseless(
        r"secret(?:[_.-]?key)?", r"private[_.-]?key", r"signing[_.-]?key", r"encryption[_.-]?key", r"master[_.-]?key"
    ),
    "api_key_assignment": _caseless(r"api[_.-]?key", "apikey", r"access[_.-]?key", r"subscription[_.-]?key"),
    "token_assignment": _caseless("token"),
}


def _not_template_password(m: re.Match[str]) -> bool:
    value = m.group("value")
    return not value.startswith(("$", "{", "<", "%")) and value.lower() not in _NOT_SECRETS


def _value_has_digit(m: re.Match[str]) -> bool:
    return any(c.isdigit() for c in m.group("value"))


def _international_phone(m: re.Match[str]) -> bool:
    return 8 <= _digit_count(m.group(0)) <= 15


def _national_phone(m: re.Match[str]) -> bool:
    return 10 <= _digit_count(m.group(0)) <= 12


_DATE_LIKE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{4}")


def _labelled_phone(m: re.Match[str]) -> bool:
    value = m.group("value")
    return 7 <= _digit_count(value) <= 15 and not _DATE_LIKE.search(value)


_VERSION_BEFORE = re.compile(
    r"(?:\b(?:v|ver|version|release|build|rev|firmware)[ \t]*[:=]?[ \t]*|[=<>~!]=[ \t]*|[A-Za-z]/)$", re.IGNORECASE
)


def _ipv4(m: re.Match[str]) -> bool:
    octets = [int(p) for p in m.group(0).split(".")]
    if max(octets) > 255:
        return False
    if octets[0] in (0, 127, 255):
        return False  # unspecified, loopback, netmasks: not anybody's address
    if all(o < 10 for o in octets) and octets[0] != 10:
        return False  # 1.0.0.0, 2.1.3.4: a version; 8.8.8.8, 1.1.1.1: public resolvers
    before = m.string[max(0, m.start() - 12) : m.start()]
    return not _VERSION_BEFORE.search(before)


def _ipv6(m: re.Match[str]) -> bool:
    candidate = m.group(0)
    if not any(c.isdigit() for c in candidate):
        return False  # dead::beef, cafe::
    groups = [g for g in candidate.split(":") if g]
    if "::" in candidate and len(groups) <= 2 and all(len(g) < 4 for g in groups):
        return False  # numpy slices: x[0::2], a[1::4], s[15::]
    try:
        address = ipaddress.IPv6Address(candidate)
    except ValueError:
        return False  # 10:30:45, MAC addresses, C++ scopes
    mapped = address.ipv4_mapped
    if mapped is not None:
        return not (mapped.is_loopback or mapped.is_unspecified or str(mapped).startswith("0."))
    return not (address.is_loopback or address.is_unspecified)


def _email(m: re.Match[str]) -> bool:
    local, _, domain = m.group(0).rpartition("@")
    tld = domain.rsplit(".", 1)[-1].lower()
    # git@github.com is an SSH login, icon@2x.png an image name.
    return local.lower() != "git" and tld not in _FILE_EXTENSIONS


_FILE_EXTENSIONS = frozenset(
    "png jpg jpeg gif svg webp ico bmp js mjs cjs ts tsx jsx css scss json yaml yml toml "
    "py pyc rb go rs java kt md txt html htm xml lock map wasm zip gz tar".split()
)
_NOT_PEOPLE = frozenset({"shared", "public", "default", "default user", "all users", "guest"})


def _home_user(m: re.Match[str]) -> bool:
    if m.group("user").lower() in _NOT_PEOPLE:
        return False
    # /home/ inside a URL is a web path (https://example.com/home/about).
    token_start = max(m.string.rfind(" ", 0, m.start()), m.string.rfind("\n", 0, m.start())) + 1
    return "://" not in m.string[token_start : m.start()]


# --- the table ---------------------------------------------------------------
# Order is priority: when two rows match overlapping text, the earlier row
# wins. Specific token shapes come before generic key = value rows, which come
# before personal data; so `GITHUB_TOKEN=ghp_...` reads [SECRET:github_token].

_PEM_LINE_BREAK = r"(?:\\r|\\n|\r|\n|[ \t])"

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        "private_key_block",
        "[SECRET:private_key]",
        # The whole block, also inside a JSON string with literal \n, and a
        # truncated block (no END line) up to its last base64 line.
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"|(?:" + _PEM_LINE_BREAK + r"+(?:[A-Za-z0-9+/=]{16,}|(?:Proc-Type|DEK-Info|Comment):[^\n\\]*))*)",
        flags=re.DOTALL,
        triggers=("private key",),
    ),
    Pattern(
        "jwt",
        "[SECRET:jwt]",
        r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        triggers=("eyj",),
        check=_starts_token(),
    ),
    Pattern(
        "aws_access_key",
        "[SECRET:aws_access_key]",
        r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
        triggers=("akia", "asia", "abia", "acca", "a3t"),
        check=_starts_token(),
    ),
    Pattern(
        "aws_secret_key",
        "[SECRET:aws_secret_key]",
        _caseless(r"aws_?secret_?(?:access_?)?key", r"secret_?access_?key")
        + r"\\?[\"']?[ \t]*(?:=>|:=|[:=])[ \t]*\\?[\"']?"
        r"(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        triggers=("secret",),
        group="value",
    ),
    Pattern(
        "gcp_api_key",
        "[SECRET:gcp_api_key]",
        r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])",
        triggers=("aiza",),
        check=_starts_token(),
    ),
    Pattern(
        "gcp_oauth_token",
        "[SECRET:gcp_oauth_token]",
        r"ya29\.[0-9A-Za-z_-]{20,}",
        triggers=("ya29.",),
        check=_starts_token(),
    ),
    Pattern(
        "github_token",
        "[SECRET:github_token]",
        r"(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])",
        triggers=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        check=_starts_token(),
    ),
    Pattern(
        "gitlab_token",
        "[SECRET:gitlab_token]",
        r"glpat-[A-Za-z0-9_-]{20,}",
        triggers=("glpat-",),
        check=_starts_token(),
    ),
    Pattern(
        "slack_token",
        "[SECRET:slack_token]",
        r"(?:xox[abposr]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})",
        triggers=("xox", "xapp-"),
        check=_starts_token(),
    ),
    Pattern(
        "slack_webhook",
        "[SECRET:slack_webhook]",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/]{20,}",
        triggers=("hooks.slack.com",),
    ),
    Pattern(
        "stripe_key",
        "[SECRET:stripe_key]",
        r"[rs]k_(?:live|test)_[0-9A-Za-z]{16,247}\b",
        triggers=("sk_live_", "rk_live_", "sk_test_", "rk_test_"),
        check=_starts_token(),
    ),
    Pattern(
        "webhook_secret",
        "[SECRET:webhook_secret]",
        r"whsec_[A-Za-z0-9+/]{16,}={0,2}",
        triggers=("whsec_",),
        check=_starts_token(),
    ),
    Pattern(
        "anthropic_key",
        "[SECRET:anthropic_key]",
        r"sk-ant-[A-Za-z0-9_-]{20,}",
        triggers=("sk-ant-",),
        check=_starts_token(),
    ),
    Pattern(
        "openai_key",
        "[SECRET:openai_key]",
        r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        triggers=("sk-",),
        check=_all(_starts_token(), _has_letter_and_digit),
    ),
    Pattern(
        "huggingface_token",
        "[SECRET:huggingface_token]",
        r"hf_[A-Za-z0-9]{30,}\b",
        triggers=("hf_",),
        check=_starts_token(),
    ),
    Pattern(
        "npm_token",
        "[SECRET:npm_token]",
        r"npm_[A-Za-z0-9]{36}\b",
        triggers=("npm_",),
        check=_starts_token(),
    ),
    Pattern(
        "pypi_token",
        "[SECRET:pypi_token]",
        r"pypi-AgE[A-Za-z0-9_-]{50,}",
        triggers=("pypi-age",),
        check=_starts_token(),
    ),
    Pattern(
        "sendgrid_key",
        "[SECRET:sendgrid_key]",
        r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b",
        triggers=("sg.",),
        check=_starts_token(),
    ),
    Pattern(
        "url_password",
        "[SECRET:url_password]",
        # scheme://user:password@host: the password goes, user and host stay.
        r"://[^\s:/?#@\[\]'\"]+:(?P<value>[^\s/?#'\"\[\]@]+)@(?=[\w\[])",
        triggers=("://",),
        group="value",
        check=_not_template_password,
    ),
    Pattern(
        "authorization_header",
        "[SECRET:authorization]",
        _caseless("proxy-authorization", "authorization")
        + r"(?i:\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?[ \t]*(?:bearer|basic|token|bot)[ \t]+)"
        r"(?P<value>[A-Za-z0-9._~+/-]{8,}=*)",
        triggers=("authorization",),
        group="value",
        check=_starts_token(),
    ),
    Pattern(
        "bearer_token",
        "[SECRET:bearer_token]",
        _caseless("bearer") + r"[ \t]+(?P<value>[A-Za-z0-9._~+/-]{16,}=*)",
        triggers=("bearer",),
        group="value",
        check=_all(_starts_token(), _value_has_digit),
    ),
    Pattern(
        "password_assignment",
        "[SECRET:password]",
        _assignment_regex(_ASSIGNMENT_KEYWORDS["password_assignment"]),
        triggers=("pass", "pwd"),
        group="value",
        check=_assignment_check(digits_allowed=True),
    ),
    Pattern(
        "secret_assignment",
        "[SECRET:secret]",
        _assignment_regex(_ASSIGNMENT_KEYWORDS["secret_assignment"]),
        triggers=("secret", "key"),
        group="value",
        check=_assignment_check(digits_allowed=False),
    ),
    Pattern(
        "api_key_assignment",
        "[SECRET:api_key]",
        _assignment_regex(_ASSIGNMENT_KEYWORDS["api_key_assignment"]),
        triggers=("key",),
        group="value",
        check=_assignment_check(digits_allowed=False),
    ),
    Pattern(
        "token_assignment",
        "[SECRET:token]",
        _assignment_regex(_ASSIGNMENT_KEYWORDS["token_assignment"]),
        triggers=("token",),
        group="value",
        check=_assignment_check(digits_allowed=False),
    ),
    Pattern(
        "email",
        "[EMAIL]",
        # The lookbehind after the first character makes the match start at the
        # beginning of a token without costing a scan from inside every word.
        r"[A-Za-z0-9_%+-](?<![A-Za-z0-9._%+-].)[A-Za-z0-9._%+-]{0,63}"
        r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![\w-])",
        triggers=("@",),
        check=_email,
    ),
    Pattern(
        "home_path_unix",
        "[PATH_HOME]",
        r"/(?:home|Users)/(?P<user>[A-Za-z0-9._-]{0,63}[A-Za-z0-9_-])(?=[/\\\s\"'`:;,.)\]}]|$)",
        triggers=("/home/", "/users/"),
        check=_home_user,
    ),
    Pattern(
        "home_path_windows",
        "[PATH_HOME]",
        r"[A-Za-z]:(?:\\\\|\\|/)(?:Users|Documents and Settings)(?:\\\\|\\|/)"
        r"(?P<user>[^\\/\s:*?\"'`<>|,;()\[\]]+(?: [^\\/\s:*?\"'`<>|,;()\[\]]+){1,2}(?=\\|/)"
        r"|[^\\/\s:*?\"'`<>|,;()\[\]]{0,63}[^\\/\s:*?\"'`<>|,;()\[\].])",
        triggers=("users", "documents and settings"),
        check=_all(_starts_token(), _home_user),
    ),
    Pattern(
        "phone_international",
        "[PHONE]",
        # +44 20 7946 0958, +1 (415) 555-0134, +4915112345678
        r"\+[1-9]\d{0,2}(?:[ .-]?\(?\d{1,5}\)?){1,6}(?![\w+])",
        triggers=("+",),
        check=_all(_starts_token("+/=.%-)]"), _international_phone),
    ),
    Pattern(
        "phone_us",
        "[PHONE]",
        # (415) 555-0134, 415-555-0134, 1-800-555-0199, 415.555.0134
        # Led by one class so the engine can skip ahead: `(`, the `1` of 1-800, or the area code.
        r"[(1-9](?:(?<=\()[2-9]\d\d\)[ ]?[2-9]\d\d[ .-]\d{4}"
        r"|(?<=1)[.-][2-9]\d\d([.-])[2-9]\d\d\1\d{4}"
        r"|(?<=[2-9])\d\d([.-])[2-9]\d\d\2\d{4})(?![\w-]|\.\d)",
        triggers=_DIGITS,
        check=_starts_token(".+/-"),
    ),
    Pattern(
        "phone_national",
        "[PHONE]",
        # European national formats with a trunk 0: 020 7946 0958, 06 12 34 56 78, 030-12345678
        r"0[1-9]\d{0,3}(?:[ -]\d{2,8}){1,4}(?![\w-]|[.:/]\d)",
        triggers=_DIGITS,
        check=_all(_starts_token(".+/:-"), _national_phone),
    ),
    Pattern(
        "phone_labelled",
        "[PHONE]",
        # Any digit grouping right after a word that says it is a phone number.
        _caseless(
            r"tel(?:ephone)?",
            r"phone(?:[ \t]*(?:no|number|#))?",
            "mobile",
            r"cell(?:phone)?",
            "fax",
            "whatsapp",
            "sms",
            r"call me(?: at| on)?",
            r"reach me(?: at| on)?",
        )
        + r"(?i:\b\.?[ \t]*(?:is[ \t]+)?[:#]?[ \t]*)"
        r"(?P<value>\+?\(?\d[\d ().-]{5,18}\d)(?![\w-])",
        triggers=("tel", "phone", "mobile", "cell", "fax", "whatsapp", "sms", "call me", "reach me"),
        group="value",
        check=_all(_starts_token(), _labelled_phone),
    ),
    Pattern(
        "ipv4",
        "[IP]",
        r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\w-]|\.\d)",  # octets <= 255 checked below
        triggers=_DIGITS,
        check=_all(_starts_token(".-"), _ipv4),
    ),
    Pattern(
        "ipv4_hostname",
        "[IP]",
        # EC2-style host names spell the address with dashes: ip-10-0-3-17
        r"ip-(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)-){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\b",
        triggers=("ip-",),
        check=_starts_token(),
    ),
    Pattern(
        "ipv6",
        "[IP]",
        r"(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?<=::))(?!\w|:[0-9A-Fa-f:])",
        triggers=("::",) + tuple(f"{c}:" for c in "0123456789abcdef"),
        check=_all(_starts_token(":."), _ipv6),
    ),
)

_PLACEHOLDER = re.compile(r"\[(?:SECRET:[a-z0-9_]+|CUSTOM:[A-Za-z0-9_.-]+|EMAIL|PHONE|IP|PATH_HOME)\]")
_CUSTOM_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_MAX_PASSES = 5  # each pass replaces at least one match; real text settles in two


def _trigger_automaton(rows: tuple[Pattern, ...]) -> ahocorasick.Automaton:
    """One Aho-Corasick automaton over every row's triggers; each trigger carries the bitmask of its rows.

    A single pass over the lowered text then tells which rows can match, where
    testing each trigger with `in` and each row against the found set cost
    more than the regexes themselves on short texts. Matches may overlap
    (`sk-ant-` holds `sk-`), and the automaton reports every one.
    """
    bits: dict[str, int] = {}
    for index, row in enumerate(rows):
        for trigger in row.triggers:
            bits[trigger] = bits.get(trigger, 0) | (1 << index)
    automaton = ahocorasick.Automaton()
    for trigger, mask in bits.items():
        automaton.add_word(trigger, mask)
    automaton.make_automaton()
    return automaton


_TRIGGERS = _trigger_automaton(PATTERNS)
# Rows without triggers run on every text (none of the built-in rows today).
_ALWAYS = sum(1 << index for index, row in enumerate(PATTERNS) if not row.triggers)


# Characters the regexes match where a trigger has an ASCII letter or digit,
# but that `lower()` leaves alone: (?i) matches `ſ` as s, `ı` and `İ` as i, `K`
# (Kelvin) as k, and \d every decimal digit (`١٠.٠.٣.١٧` reads as an address).
# The trigger scan folds them first, so no row is skipped on a text its regex
# matches. Every digit trigger belongs to the same rows, so any digit will do.
_TRIGGER_LETTERS = str.maketrans({"ſ": "s", "ı": "i", "İ": "i", "K": "k"})
_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")


def _rows_to_run(text: str) -> tuple[Pattern, ...]:
    """The built-in rows, in table order, one of whose triggers occurs in `text` (case aside)."""
    if not text.isascii():
        text = _NON_ASCII_DIGIT.sub("0", text.translate(_TRIGGER_LETTERS))
    mask = _ALWAYS
    for _, bits in _TRIGGERS.iter(text.lower()):
        mask |= bits
    return _rows_of_mask(mask)


@lru_cache(maxsize=4096)
def _rows_of_mask(mask: int) -> tuple[Pattern, ...]:
    # Few distinct trigger combinations occur in practice, so each row tuple is built once.
    return tuple(row for index, row in enumerate(PATTERNS) if mask >> index & 1)


# --- custom patterns ---------------------------------------------------------


def validate_pattern(regex: str) -> None:
    """Raise ValueError with a one-line reason if `regex` cannot be a scrub pattern."""
    if not isinstance(regex, str) or not regex:
        raise ValueError("the pattern is empty")
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    if compiled.fullmatch(""):
        # It would "replace" the empty string between every two characters.
        raise ValueError("the pattern matches the empty string")


@lru_cache(maxsize=256)
def _custom_rows(extra: tuple[tuple[str, str], ...]) -> tuple[Pattern, ...]:
    rows = []
    for name, regex in extra:
        if not isinstance(name, str) or not _CUSTOM_NAME.fullmatch(name):
            raise ValueError(f"custom pattern name {name!r}: use 1-64 letters, digits, '_', '-' or '.'")
        try:
            validate_pattern(regex)
        except ValueError as exc:
            raise ValueError(f"custom pattern {name!r}: {exc}") from None
        rows.append(Pattern(f"custom:{name}", f"[CUSTOM:{name}]", regex))
    return tuple(rows)


# Values exports write as data, not text: ids, timestamps, dates, verdicts.
# The export self-check reads every string of its files, so a custom pattern
# matching one of these would fail every export; such a pattern is refused.
DATA_VALUES = (
    "1", "42", "123456", "9876543210", "2026-11-30", "2026-11-30T06:00:00+00:00", "2026-11-30 06:00:00",
    "evt_0f3c2a", "failure", "not_failure", "duplicate", "spam", "train", "eval", "none", "rating", "report",
    "low", "medium", "high", "critical", "user", "assistant", "system", "tool",
)


def validate_custom_patterns(pairs: Sequence[tuple[str, str]], *, data_values: Sequence[str] = ()) -> None:
    """Raise ValueError naming the first (name, regex) pair that cannot be a custom pattern.

    Besides compiling, a pattern must not match any of DATA_VALUES or `data_values` (e.g. source slugs).
    """
    names = [name for name, _ in pairs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"custom pattern {repeated[0]!r} is named twice")
    for row in _rows_with(pairs)[len(PATTERNS) :]:
        for value in (*DATA_VALUES, *data_values):
            if row.compiled.search(value):
                raise ValueError(
                    f"custom pattern {row.name.removeprefix('custom:')!r} matches {value!r}, a value exports "
                    "write as data (an id, a date, a source, a verdict): make it more specific"
                )


def _extra_key(extra_patterns: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """`extra_patterns` as a hashable key: the custom rows and the result caches are looked up by it."""
    if not extra_patterns:
        return ()
    try:
        return tuple((name, regex) for name, regex in extra_patterns)
    except (TypeError, ValueError):
        raise ValueError("extra_patterns must be (name, regex) pairs") from None


def _rows_with(extra_patterns: Sequence[tuple[str, str]]) -> tuple[Pattern, ...]:
    return PATTERNS + _custom_rows(_extra_key(extra_patterns))


# --- the engine --------------------------------------------------------------

# Results are cached per (text, custom patterns): an export scrubs the same
# system prompts, tool names and roles over and over, and its self-check reads
# every written string back, so most texts are seen many times. Only texts up
# to this length are cached: 16,384 texts of at most 1,024 characters bound
# each cache to a few tens of MB however long an export runs.
_CACHED_TEXT_LIMIT = 1024
_CACHE_SIZE = 16384


def _find(text: str, custom: tuple[Pattern, ...]) -> list[tuple[int, int, Pattern]]:
    """Non-overlapping matches, earlier rows first, never inside a placeholder.

    The built-in rows run only when one of their triggers occurs; `custom`
    rows (which have no triggers and come after every built-in row) always run.
    """
    rows = _rows_to_run(text)
    if custom:
        rows += custom
    if not rows:
        return []
    starts: list[int] = []
    ends: list[int] = []
    found: list[tuple[int, int, Pattern]] = []

    def take(start: int, end: int) -> bool:
        i = bisect.bisect_right(starts, start)
        if (i and ends[i - 1] > start) or (i < len(starts) and starts[i] < end):
            return False
        starts.insert(i, start)
        ends.insert(i, end)
        return True

    if "[" in text:
        for m in _PLACEHOLDER.finditer(text):
            take(m.start(), m.end())

    for row in rows:
        for m in row.compiled.finditer(text):
            start, end = m.span(row.group)
            if start >= end or (row.check is not None and not row.check(m)):
                continue
            if take(start, end):
                found.append((start, end, row))
    return found


def scrub(text: str, *, extra_patterns: Sequence[tuple[str, str]] = ()) -> ScrubResult:
    """Replace every secret and piece of personal data in `text` with its placeholder.

    `extra_patterns` are (name, regex) pairs a source adds; their matches
    become `[CUSTOM:<name>]`. A bad regex raises ValueError naming the pattern.
    """
    if not isinstance(text, str):
        raise TypeError(f"scrub() takes a str, not {type(text).__name__}")
    key = _extra_key(extra_patterns)
    custom = _custom_rows(key)  # a bad custom regex fails here, before any cache lookup
    if len(text) <= _CACHED_TEXT_LIMIT:
        scrubbed, counts = _scrub_cached(text, key)
    else:
        scrubbed, counts = _scrub_text(text, custom)
    return ScrubResult(scrubbed, dict(counts))


@lru_cache(maxsize=_CACHE_SIZE)
def _scrub_cached(text: str, key: tuple[tuple[str, str], ...]) -> tuple[str, tuple[tuple[str, int], ...]]:
    return _scrub_text(text, _custom_rows(key))


def _scrub_text(text: str, custom: tuple[Pattern, ...]) -> tuple[str, tuple[tuple[str, int], ...]]:
    """The scrubbed text and its (label, replacements) pairs, immutable so that a cached result stays intact."""
    counts: Counter[str] = Counter()
    found = _find(text, custom)
    # A replacement changes what its neighbours see: in `555-0198(212) 555-0198`
    # the second number is glued to the first until the first is [PHONE]. So
    # scrub again until nothing matches, which makes scrubbing idempotent for
    # any input. Only the changed lines can hold a new match (see Pattern);
    # custom regexes may span lines, so with them every pass reads it all.
    for _ in range(_MAX_PASSES):
        if not found:
            break
        text, inserted = _replace(text, found, counts)
        found = _find(text, custom) if custom else _find_in_lines(text, inserted, custom)
    return text, tuple(counts.items())


def _replace(
    text: str, found: list[tuple[int, int, Pattern]], counts: Counter[str]
) -> tuple[str, list[tuple[int, int]]]:
    """Swap each match for its placeholder; also returns where the placeholders now are."""
    found.sort(key=lambda hit: hit[0])
    parts: list[str] = []
    inserted: list[tuple[int, int]] = []
    position = 0
    length = 0
    for start, end, row in found:
        parts.append(text[position:start])
        length += start - position
        parts.append(row.placeholder)
        inserted.append((length, length + len(row.placeholder)))
        length += len(row.placeholder)
        counts[row.label] += 1
        position = end
    parts.append(text[position:])
    return "".join(parts), inserted


def _find_in_lines(
    text: str, spans: list[tuple[int, int]], custom: tuple[Pattern, ...]
) -> list[tuple[int, int, Pattern]]:
    """`_find` over just the lines that hold `spans`, in whole-text offsets."""
    blocks: list[list[int]] = []
    for start, end in spans:  # sorted, so the blocks come out sorted too
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end
        if blocks and line_start <= blocks[-1][1] + 1:
            blocks[-1][1] = max(blocks[-1][1], line_end)
        else:
            blocks.append([line_start, line_end])
    found = []
    for block_start, block_end in blocks:
        for start, end, row in _find(text[block_start:block_end], custom):
            found.append((start + block_start, end + block_start, row))
    return found


def find_unscrubbed(text: str, *, extra_patterns: Sequence[tuple[str, str]] = ()) -> list[str]:
    """Names of the pattern rows that would still replace something in `text`.

    Exports run this on what they are about to write and fail the version on
    any hit; on the output of `scrub` it is always empty.
    """
    if not isinstance(text, str):
        raise TypeError(f"find_unscrubbed() takes a str, not {type(text).__name__}")
    key = _extra_key(extra_patterns)
    custom = _custom_rows(key)
    if len(text) <= _CACHED_TEXT_LIMIT:
        return list(_unscrubbed_cached(text, key))
    return list(_unscrubbed_names(text, custom))


def find_unscrubbed_in(texts: Iterable[str], *, extra_patterns: Sequence[tuple[str, str]] = ()) -> list[str]:
    """Names of the pattern rows that would still replace something in any of `texts`.

    `find_unscrubbed` over many texts, for an export's self-check: the custom
    patterns are resolved once, and each text costs a cache lookup when it was
    seen recently (roles, tool names and ids recur in every file of a version).
    """
    key = _extra_key(extra_patterns)
    custom = _custom_rows(key)
    names: set[str] = set()
    texts = list(texts)
    try:
        distinct = set(texts)  # each distinct text once: roles and tool names recur on every row
    except TypeError:
        distinct = texts  # something unhashable, so not a text: the loop below names it
    for text in distinct:
        if not isinstance(text, str):
            raise TypeError(f"find_unscrubbed_in() takes str texts, not {type(text).__name__}")
        hits = _unscrubbed_cached(text, key) if len(text) <= _CACHED_TEXT_LIMIT else _unscrubbed_names(text, custom)
        if hits:
            names.update(hits)
    return sorted(names)


@lru_cache(maxsize=_CACHE_SIZE)
def _unscrubbed_cached(text: str, key: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    return _unscrubbed_names(text, _custom_rows(key))


def _unscrubbed_names(text: str, custom: tuple[Pattern, ...]) -> tuple[str, ...]:
    return tuple(sorted({row.name for _, _, row in _find(text, custom)}))


# JSON keys are classified by the same keyword lists as the key of `key = value`.
_KEY_ROWS = tuple(
    (
        row,
        re.compile(r"-{0,2}(?:[A-Za-z_][\w.-]{0,60}?)?(?P<kw>" + _ASSIGNMENT_KEYWORDS[row.name] + r")", re.IGNORECASE),
    )
    for row in PATTERNS
    if row.name in _ASSIGNMENT_KEYWORDS
)


def _secret_for_key(key: Any, value: str) -> Pattern | None:
    """The assignment row whose key name `key` is, when `value` could be its secret."""
    if not isinstance(key, str):
        return None
    # The key first: most keys ("name", "path", "output") name no secret, and
    # the same few keys recur in every tool call, so their answer is cached.
    row = _secret_row_for_key(key)
    if row is None or not _plausible_secret_value(value, delimited=True):
        return None
    if any(c.isspace() for c in value) or (value.isdigit() and len(value) < 6):
        return None
    if value.isdigit() and row.name != "password_assignment":
        return None
    return row


@lru_cache(maxsize=1024)
def _secret_row_for_key(key: str) -> Pattern | None:
    """The first assignment row whose keyword ends `key` as a word of its own."""
    for row, key_regex in _KEY_ROWS:
        m = key_regex.fullmatch(key)
        if m and _keyword_starts_a_word(key, m.start("kw")):
            return row
    return None


def scrub_json(value: Any, *, extra_patterns: Sequence[tuple[str, str]] = ()) -> tuple[Any, Counter[str]]:
    """Scrub every string inside nested dicts and lists; keys stay as they are.

    A string in which no pattern matches, under a key that names a secret
    (`"password"`, `"HF_TOKEN"`, `"client_secret"`), is replaced whole: the key
    is the only clue that a bare random string is a credential. Returns the
    new value and the counts.
    """
    _rows_with(extra_patterns)  # a bad custom regex fails before any work

    def scrub_text(text: str) -> tuple[str, Iterable[tuple[str, int]]]:
        result = scrub(text, extra_patterns=extra_patterns)
        return result.text, result.counts.items()

    return _scrub_walk(value, scrub_text)


def _scrub_walk(value: Any, scrub_text) -> tuple[Any, Counter[str]]:
    """scrub_json's walk, with `scrub_text(text) -> (text, (label, count) pairs)` doing each string."""
    counts: Counter[str] = Counter()

    def walk(node: Any, key: Any = None) -> Any:
        if isinstance(node, str):
            text, found = scrub_text(node)
            found = list(found)
            if not found and key is not None:
                # Nothing with a known shape: the key may still say it is a secret.
                row = _secret_for_key(key, node)
                if row is not None and not _PLACEHOLDER.search(node):
                    counts[row.label] += 1
                    return row.placeholder
            for label, count in found:
                counts[label] += count
            return text
        if isinstance(node, dict):
            return {k: walk(v, k) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, tuple):
            return tuple(walk(v) for v in node)
        return node

    return walk(value), counts


class ScrubMemo:
    """`scrub`, `scrub_json` and `find_unscrubbed` for one long job (an export), each distinct text worked once.

    An export scrubs every string of every item and then checks every string
    it writes; most of them recur (roles, prompts, tool names, tool results,
    the same text in every format). The module's LRU caches bound what they
    keep per text and cost a call chain per lookup; this memo is a plain dict
    per job, so a repeat costs one lookup. Results are the module functions'
    own: `scrub(t)` is `_scrub_text(t)`, `find_unscrubbed(t)` the rows `_find(t)`
    names. A text in which `scrub` found nothing is recorded as clean, which is
    exactly what `find_unscrubbed` computes for it (the same `_find` call), so
    the export's check of that text costs nothing more.

    Memory is bounded: texts over `text_limit` characters are worked but not
    kept, and the memo starts afresh once its texts and entries would take
    about `size_limit` bytes (each entry costs its characters plus about 200
    bytes of dict slot, string header and result). A 100,000-item export holds
    about two million distinct short texts, so the bound, not the data, sets
    the memory.
    """

    # Bytes an entry costs beyond its characters: the dict slot, the str header, the result tuple.
    ENTRY_BYTES = 200

    def __init__(
        self,
        extra_patterns: Sequence[tuple[str, str]] = (),
        *,
        text_limit: int = 8192,
        size_limit: int = 8_000_000,
    ) -> None:
        self.extra_patterns = tuple(_extra_key(extra_patterns))
        self._custom = _custom_rows(self.extra_patterns)  # a bad custom regex fails here
        self._text_limit = text_limit
        self._size_limit = size_limit
        self._size = 0
        # text -> the names of the rows that would replace something in it (() when clean).
        self._names: dict[str, tuple[str, ...]] = {}
        # text -> (scrubbed, counts) for the texts that scrubbing changes.
        self._scrubbed: dict[str, tuple[str, tuple[tuple[str, int], ...]]] = {}

    def _keep(self, text: str) -> bool:
        if len(text) > self._text_limit:
            return False
        cost = len(text) + self.ENTRY_BYTES
        self._size += cost
        if self._size > self._size_limit:
            self._names.clear()
            self._scrubbed.clear()
            self._size = cost
        return True

    def scrub(self, text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
        """`scrub(text)` as (text, counts as (label, n) pairs)."""
        if self._names.get(text) == ():
            return text, ()
        hit = self._scrubbed.get(text)
        if hit is not None:
            return hit
        if not isinstance(text, str):
            raise TypeError(f"scrub() takes a str, not {type(text).__name__}")
        result = _scrub_text(text, self._custom)
        if self._keep(text):
            if result[1]:
                self._scrubbed[text] = result
            else:
                # Nothing replaced: the first _find found nothing, which is find_unscrubbed's answer too.
                self._names[text] = ()
        return result

    def unscrubbed(self, text: str) -> tuple[str, ...]:
        """`find_unscrubbed(text)` as a tuple of row names."""
        names = self._names.get(text)
        if names is None:
            if not isinstance(text, str):
                raise TypeError(f"find_unscrubbed() takes a str, not {type(text).__name__}")
            names = _unscrubbed_names(text, self._custom)
            if self._keep(text):
                self._names[text] = names
        return names

    def scrub_json(self, value: Any) -> tuple[Any, Counter[str]]:
        """`scrub_json(value)` through this memo: the same value and counts."""
        return _scrub_walk(value, self.scrub)
