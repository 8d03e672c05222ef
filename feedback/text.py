"""The text that represents a signal for embedding and clustering.

A signal's text should say *what went wrong*, not which repository it
happened in, so that two reports of the same failure in different code bases
land close together:

1. The comment or report comes first. When it says little ("no", "meh",
   "didn't work", an emoji), the evidence is added: a tool error from the
   run, its flags (timed out, step limit), the end of the model's output,
   and the last request only when the run left nothing else.
2. After scrubbing (secrets and personal data never reach a vector), what
   names a repository rather than a behaviour is masked with a generic word:
   file paths and names, code identifiers (snake_case, camelCase, dotted
   names), hashes, URLs and numbers.

`EMBED_RECIPE` versions this recipe: items embedded under an older one are
re-embedded (`manage.py reembed`, and a bounded batch per sweep), and a
cluster run only reads vectors of the current recipe, never a mix.
"""

from __future__ import annotations

import re
from typing import Any

# 1: comment, or request and answer start for a bare rating.
# 2: evidence for vague comments, repository names masked.
EMBED_RECIPE = 2

_REQUEST_CHARS = 200
_OUTPUT_CHARS = 200
_ERROR_CHARS = 160

# Words that judge without saying what went wrong.
_GENERIC_WORDS = frozenset(
    """
    a about again all also am an and answer answers any are as at awful bad be been before but
    can cant could did didn didnt do does doesn doesnt don dont even ever fail failed fails fine
    for good great hm hmm hmmm i im in incorrect is isn isnt it its just like me meh my nah
    nice no nope not of ok okay on or output poor quite really reply response result s so still
    t terrible than thanks that the this to too try ugh useless very want wanted was wasn
    wasnt what work worked working works worse worst wrong yes you
    """.split()
)

_ERROR_LINE = re.compile(
    r"error|failed|failure|exception|traceback|timed out|timeout|denied|not found|refused|panic|fatal|"
    r"cannot|could not|step limit|killed|exit (?:code|status) [1-9]",
    re.IGNORECASE,
)
_METADATA_FLAGS = ("error", "stopped", "reason", "status", "timed_out")


def embed_text(item: Any, *, extra_patterns=()) -> str:
    """The text the current recipe embeds: derived, scrubbed, then masked.

    Secrets and personal data never reach a vector or anything derived from
    it; repository names are masked so that vectors say what went wrong.
    """
    from feedback.scrubber import scrub

    return mask_identifiers(scrub(embeddable_text(item), extra_patterns=extra_patterns).text)


def is_vague(text: str) -> bool:
    """True when a comment names no failure: fewer than two words beyond judging ones."""
    words = re.findall(r"[^\W\d_]+", text.lower())
    return sum(1 for word in words if word not in _GENERIC_WORDS and len(word) > 1) < 2


def embeddable_text(item: Any) -> str:
    """What represents an item before scrubbing and masking: its words, then evidence if they say little.

    Takes anything with ``title``, ``comment``, ``expected`` and ``context``
    (a feedback item, or a row read with those fields).
    """
    said = [item.title, item.comment, item.expected and f"Expected: {item.expected}"]
    parts = [part for part in said if part]
    if is_vague(" ".join(parts)):
        parts += _evidence(item.context if isinstance(item.context, dict) else {})
    return "\n".join(" ".join(str(part).split()) for part in parts if part).strip()


def _evidence(context: dict) -> list[str]:
    """A tool error, run flags and the end of the output; the last request only when there is nothing else.

    Plain text, no "Output:" labels: a label every item shares would pull
    unrelated items together. The request says what the task was, not what
    went wrong, so it speaks only for a run that left no other trace.
    """
    found = []
    error = _tool_error(context)
    if error:
        found.append(error)
    metadata = context.get("metadata")
    if isinstance(metadata, dict):
        for key in _METADATA_FLAGS:
            value = metadata.get(key)
            if value is True:
                found.append(key.replace("_", " "))
            elif isinstance(value, str) and value:
                found.append(value[:80])
    output = context.get("output")
    if isinstance(output, str) and output.strip():
        found.append(_tail(output, _OUTPUT_CHARS))
    if not found:
        messages = context.get("messages")
        if isinstance(messages, list):
            requests = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
            requests = [r for r in requests if isinstance(r, str) and r.strip()]
            if requests:
                found.append(requests[-1][:_REQUEST_CHARS])
    return found


def _tool_error(context: dict) -> str:
    """The first error-looking line of the last tool result that has one."""
    results = []
    calls = context.get("tool_calls")
    if isinstance(calls, list):
        results += [call.get("result") for call in calls if isinstance(call, dict)]
    messages = context.get("messages")
    if isinstance(messages, list):
        results += [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
    for result in reversed(results):
        if not isinstance(result, str):
            continue
        for line in result.splitlines():
            if _ERROR_LINE.search(line):
                return line.strip()[:_ERROR_CHARS]
    return ""


def _tail(text: str, chars: int) -> str:
    text = " ".join(text.split())
    if len(text) <= chars:
        return text
    cut = text[-chars:]
    return cut[cut.find(" ") + 1 :] if " " in cut else cut


# --- Masking ------------------------------------------------------------------------

_EXTENSIONS = (
    "py|pyi|ipynb|js|mjs|cjs|ts|tsx|jsx|vue|svelte|go|rs|java|kt|kts|scala|rb|php|c|h|cc|cpp|hpp|cs|swift|m|mm|"
    "sh|bash|zsh|ps1|yml|yaml|json|jsonl|toml|ini|cfg|conf|env|lock|xml|html|htm|css|scss|less|sql|md|rst|txt|"
    "csv|tsv|log|proto|tf|gradle|dart|lua|pl|r|ex|exs|erl|hs|ml|clj|zig|nim|jl|wasm|so|dll|exe|bin|gz|zip|tar"
)
# Ordered: earlier patterns see the text before later ones rewrite it.
_MASKS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"\b(?:(?:https?|ftp|git|ssh)://|www\.)\S+?(?=[)\]>.,;:!?'\"]*(?:\s|$))", re.IGNORECASE), "link"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE), "hash"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b", re.IGNORECASE), "hash"),
    (re.compile(r"\b[A-Za-z]:\\[^\s,;:\"')]+"), "file"),
    # Paths: anything with a slash that is not a plain word pair (and/or).
    (re.compile(r"(?<![\w/])(?:~|\.{1,2})?/?[\w.@+-]+(?:/[\w.@+-]*)+|(?<![\w/~.])(?:~|\.{1,2})?/[A-Za-z][\w.@+-]*"), None),
    (re.compile(rf"\b[\w-]+(?:\.[\w-]+)*\.(?:{_EXTENSIONS})\b", re.IGNORECASE), "file"),
    (re.compile(r"\b(?:Dockerfile|Makefile|Gemfile|Procfile|Rakefile|Jenkinsfile|Vagrantfile|CMakeLists)\b"), "file"),
    # Calls and dotted names (os.path.join, client.get()): code, not words.
    (re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w+)+(?:\(\))?|\b\w+\(\)"), "name"),
    (re.compile(r"\b_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*\b"), "name"),
    (re.compile(r"\b[a-z]{2,}[0-9]*[A-Z]\w*\b"), "name"),
    # PascalCase with two humps; error and exception types say what failed, so they stay.
    (re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b(?<!Error)(?<!Exception)(?<!Warning)"), "name"),
    (re.compile(r"(?<![\w.])[-+]?\d+(?:[.,:]\d+)*(?:%|[a-zA-Z]{1,2}\b)?"), "N"),
)
_WORD_PAIRS = frozenset(
    "and/or either/or yes/no on/off true/false read/write input/output in/out he/she his/her client/server "
    "up/down before/after pros/cons".split()
)
_BACKTICKS = re.compile(r"`+")
# Scrubber placeholders ([SECRET:github_token], [EMAIL]) stay as they are:
# they already hide what they replaced, and reviewers and checks look for them.
_PLACEHOLDER = re.compile(r"\[[A-Z_]+(?::[\w-]+)?\]")


def _path_or_words(match: re.Match) -> str:
    found = match.group(0)
    parts = [part for part in found.split("/") if part]
    if parts and all(part.isdigit() for part in parts):
        return "N"  # a date such as 12/03
    plain = len(parts) == 2 and all(part.isalpha() for part in parts) and not found.startswith(("/", "~", "."))
    if plain and found.lower() in _WORD_PAIRS:
        return found
    return "file"


def mask_identifiers(text: str) -> str:
    """Replace what names a repository (paths, identifiers, hashes, URLs, numbers) with a generic word."""
    placeholders = _PLACEHOLDER.findall(text)
    # Private-use characters hold their places: no mask matches them.
    text = _PLACEHOLDER.sub("\ue000", _BACKTICKS.sub("", text))
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement if replacement is not None else _path_or_words, text)
    for placeholder in placeholders:
        text = text.replace("\ue000", placeholder, 1)
    return " ".join(text.split()) if "\n" not in text else "\n".join(" ".join(line.split()) for line in text.splitlines())
