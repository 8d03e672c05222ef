"""The tool calls of a rollout, read from a context as it was received, and what each call does:
the commands it runs, the paths and contents it writes.

Where the calls are: ``context["tool_calls"]`` (the rated run's own calls,
location ``tool_calls.<i>``) and each message's ``tool_calls``
(``messages.<j>.tool_calls.<k>``). Both the flat shape ``{"name",
"arguments", "result"}`` and OpenAI's ``{"function": {"name", "arguments"}}``
are read; arguments given as JSON text are decoded."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# Keep texts bounded: a check reads at most this much of one argument or result.
MAX_TEXT = 20_000
EVIDENCE_MAX = 160


@dataclass(slots=True)
class Call:
    """One tool call, normalised: where it is, what was called, with what, and what came back."""

    index: int  # order in the rollout: message calls first, then the run's own calls
    location: str
    name: str
    arguments: Any
    # (key, value) for every string inside the arguments; the key is the innermost dict key.
    strings: tuple[tuple[str, str], ...]
    result: str
    raw: Any
    # Read once per call, since every check asks: the shell commands it runs, the paths it names,
    # the text it writes, whether it is a file tool that changes files.
    commands: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    contents: tuple[str, ...] = ()
    writes: bool = False


def _decoded(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _string_leaves(value: Any, key: str = "") -> Iterable[tuple[str, str]]:
    if isinstance(value, dict) and all(type(v) is str for v in value.values()):
        # The usual arguments: a flat object of strings ({"path": ..., "command": ...}).
        yield from ((str(k).lower(), v[:MAX_TEXT]) for k, v in value.items())
        return
    if isinstance(value, str):
        yield key, value[:MAX_TEXT]
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _string_leaves(v, str(k).lower())
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _string_leaves(v, key)


def _result_text(raw: dict) -> str:
    for key in ("result", "output", "content"):
        value = raw.get(key)
        if value is not None:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
            return text[:MAX_TEXT]
    return ""


def _call(raw: Any, *, index: int, location: str) -> Call | None:
    if not isinstance(raw, dict):
        return None
    function = raw.get("function")
    if isinstance(function, dict):
        name, arguments = function.get("name"), function.get("arguments")
    elif isinstance(function, str):
        name, arguments = function, raw.get("arguments")
    else:
        name, arguments = raw.get("name"), raw.get("arguments", raw.get("input"))
    arguments = _decoded(arguments)
    name = str(name or "").lower()[:200]
    strings = tuple(_string_leaves(arguments))
    return Call(
        index=index,
        location=location,
        name=name,
        arguments=arguments,
        strings=strings,
        result=_result_text(raw),
        raw=raw,
        commands=_commands(name, arguments, strings),
        paths=tuple(value for key, value in strings if key in _PATH_KEYS),
        contents=tuple(value for key, value in strings if key in _CONTENT_KEYS),
        writes=_writes_files(name, arguments),
    )


def calls_of(context: Any) -> list[Call]:
    """Every tool call of a rated context, in the order they happened."""
    if not isinstance(context, dict):
        return []
    calls: list[Call] = []
    messages = context.get("messages")
    for j, message in enumerate(messages if isinstance(messages, list) else ()):
        if isinstance(message, dict) and isinstance(message.get("tool_calls"), list):
            for k, raw in enumerate(message["tool_calls"]):
                call = _call(raw, index=len(calls), location=f"messages.{j}.tool_calls.{k}")
                if call is not None:
                    calls.append(call)
    own = context.get("tool_calls")
    for i, raw in enumerate(own if isinstance(own, list) else ()):
        call = _call(raw, index=len(calls), location=f"tool_calls.{i}")
        if call is not None:
            calls.append(call)
    return calls


_SHELL_TOOL = re.compile(r"shell|bash|\bsh\b|terminal|exec|command|run_cmd|run_command|powershell|^run$|cmd")
_WRITE_TOOL = re.compile(
    r"write|edit|create|patch|replace|insert|delete|remove|\brm\b|move|rename|apply|save|update_file|append"
)
_COMMAND_KEYS = frozenset({"command", "cmd", "script", "shell", "commands", "args"})
_PATH_KEYS = frozenset(
    {"path", "file", "file_path", "filepath", "filename", "target", "paths", "src", "dest", "destination",
     "new_path", "old_path", "target_file", "files", "uri"}
)
_CONTENT_KEYS = frozenset(
    {"content", "contents", "change", "patch", "diff", "new_str", "new_string", "text", "code", "replacement",
     "insert", "edits", "body", "new_content", "file_text", "insert_text"}
)
_VIEW_COMMANDS = frozenset({"view", "read", "show", "cat", "list"})


@lru_cache(maxsize=4096)
def _tool_kind(name: str) -> tuple[bool, bool]:
    """(a shell tool, a file-writing tool) by its name; names repeat across every rollout, so kept."""
    return bool(_SHELL_TOOL.search(name)), bool(_WRITE_TOOL.search(name))


def _commands(name: str, arguments: Any, strings: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """The shell commands a call runs."""
    is_shell, is_write = _tool_kind(name)
    found = [value for key, value in strings if key in _COMMAND_KEYS]
    if not found and is_shell:
        found = [value for key, value in strings if key in ("", "input", "code")]
        if not found and isinstance(arguments, str):
            found = [arguments[:MAX_TEXT]]
    if found and is_write and not is_shell:
        # An editor tool's "command" is its sub-command (view, str_replace), not a shell line.
        found = [value for value in found if value.lower() not in _VIEW_COMMANDS and " " in value]
    return tuple(found)


def _writes_files(name: str, arguments: Any) -> bool:
    """A file tool that changes files (an editor tool's `view` sub-command does not)."""
    is_shell, is_write = _tool_kind(name)
    if not is_write or (is_shell and "file" not in name):
        return False
    sub = arguments.get("command") if isinstance(arguments, dict) else None
    return not (isinstance(sub, str) and sub.lower() in _VIEW_COMMANDS)


def commands(call: Call) -> tuple[str, ...]:
    return call.commands


def paths(call: Call) -> tuple[str, ...]:
    return call.paths


def contents(call: Call) -> tuple[str, ...]:
    return call.contents


def writes_files(call: Call) -> bool:
    return call.writes


_SPLIT_COMMANDS = re.compile(r"\s*(?:&&|\|\||;|\||\n)\s*")


def simple_commands(command: str) -> list[list[str]]:
    """A shell line as its simple commands, each a list of words (quotes honoured where they parse)."""
    result = []
    for part in _SPLIT_COMMANDS.split(command[:MAX_TEXT]):
        if not part.strip():
            continue
        try:
            words = shlex.split(part, posix=True)
        except ValueError:
            words = part.split()
        if words:
            result.append(words)
    return result


_WRITING_PROGRAMS = frozenset({"rm", "unlink", "mv", "cp", "truncate", "tee", "shred", "touch", "install"})
_MAY_WRITE = re.compile(r">|\b(?:rm|unlink|mv|cp|truncate|tee|shred|touch|install|sed|perl|git\s+(?:rm|mv))\b")


def shell_written_paths(command: str) -> list[str]:
    """Files a shell line writes or deletes: rm/mv/cp/tee/truncate arguments, sed -i files, redirect targets."""
    if not _MAY_WRITE.search(command):
        return []
    written = []
    for target in re.findall(r"(?<![0-9&])>>?\s*([^\s;&|<>]+)", command[:MAX_TEXT]):
        written.append(target)
    for words in simple_commands(command):
        program = words[0].rsplit("/", 1)[-1]
        rest = [word for word in words[1:] if not word.startswith("-")]
        if program in ("sudo", "env") and len(words) > 1:
            program, rest = words[1].rsplit("/", 1)[-1], [w for w in words[2:] if not w.startswith("-")]
        if program in _WRITING_PROGRAMS:
            written += rest
        elif program in ("sed", "perl") and any(word == "-i" or word.startswith("-i") for word in words[1:]):
            written += rest[1:]  # the first word is the script
        elif program == "git" and rest[:1] in (["rm"], ["mv"]):
            written += rest[1:]
    return [path for path in written if path and path != "/dev/null"]


def evidence_of(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EVIDENCE_MAX else text[: EVIDENCE_MAX - 1] + "…"


def arguments_text(call: Call) -> str:
    arguments = call.arguments
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, default=str)
    return text[:MAX_TEXT]
