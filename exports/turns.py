"""Conversations in the OpenAI / Hugging Face chat schema (tool calls and tool turns included), and
what a record may be trained on: which response someone vouched for, which rating a verdict overrules."""



from exports.encoding import json_text
from exports.records import ExportRecord

# The reviewer's verdicts that speak to the rated output (labeling.models.Label.Verdict).
CONFIRMED_FAILURE = "failure"
NOT_FAILURE = "not_failure"
SPAM = "spam"


def rated_label(record: ExportRecord) -> bool | None:
    """Is the rated output a desirable response, by its rating and the reviewer's verdict? None: nobody says.

    A reviewer's confirmed failure outweighs a thumbs-up. A thumbs-down a
    reviewer called "not a failure" gets no label: that verdict clears the
    output of blame, it does not vouch for it. Spam means the rating carries no
    signal at all.
    """
    if not record.output or record.verdict == SPAM:
        return None
    if record.verdict == CONFIRMED_FAILURE or record.confirmed_checks:
        # A confirmed rollout flag (reward hacking, a risky action) outweighs any rating.
        return False
    if record.rating == 1:
        return True
    if record.rating == -1 and record.verdict != NOT_FAILURE:
        return False
    return None


def sft_target(record: ExportRecord) -> str | None:
    """The response a supervised row may end in: only one someone vouched for, never a thumbs-down output.

    Never for a rollout with a confirmed flag: its row would carry the flagged tool calls before whatever answer.
    """
    if record.confirmed_checks:
        return None
    if record.corrected_response.strip():
        return record.corrected_response
    if record.rating == 1 and rated_label(record) is True:
        return record.output
    return None


def why_no_target(record: ExportRecord) -> str:
    if record.confirmed_checks:
        return "have a confirmed rollout flag (" + ", ".join(record.confirmed_checks) + ")"
    if record.verdict == SPAM:
        return "are marked spam and have no corrected response"
    if record.rating == -1:
        return "are thumbs-down without a corrected response"
    if record.rating == 1 and record.verdict == CONFIRMED_FAILURE:
        return "are thumbs-up a reviewer confirmed as a failure, without a corrected response"
    if record.rating == 1:
        return "are thumbs-up without an output"
    return "have no rating and no corrected response"


def assistant(content: str) -> dict[str, str]:
    return {"role": "assistant", "content": content}


def _tool_name_and_arguments(call: dict) -> tuple[str | None, object]:
    function = call.get("function")
    if isinstance(function, dict):  # {"function": {"name", "arguments"}}: the OpenAI shape
        return function.get("name"), function.get("arguments")
    if isinstance(function, str):  # {"function": name, "arguments"}: Inspect's shape
        return function, call.get("arguments")
    return call.get("name"), call.get("arguments")


def openai_tool_call(call, *, fallback_id: str) -> dict | None:
    """One tool call as the chat schema has it (arguments as JSON text); None for a call without a name."""
    if not isinstance(call, dict):
        return None
    name, arguments = _tool_name_and_arguments(call)
    if not isinstance(name, str) or not name:
        return None
    call_id = call.get("id")
    if not isinstance(arguments, str):
        arguments = json_text({} if arguments is None else arguments)
    return {
        "id": call_id if isinstance(call_id, str) and call_id else fallback_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _cached(record: ExportRecord, name: str, sources: tuple, build):
    """A turn list built once per record and shared by every format (callers never change it).

    Kept with the objects it was built from, so a record whose fields are
    replaced (scrubbing does) builds it anew.
    """
    hit = record.derived.get(name)
    if hit is not None and len(hit[0]) == len(sources) and all(a is b for a, b in zip(hit[0], sources)):
        return hit[1]
    value = build(record)
    record.derived[name] = (sources, value)
    return value


def prompt_turns(record: ExportRecord) -> list[dict]:
    """The conversation up to the rated answer, with the tool calls and tool results its turns hold.

    The list is shared between formats: extend a copy (`+`), never the list itself.
    """
    return _cached(record, "prompt", (record.messages, record.message_tools), _prompt_turns)


def _prompt_turns(record: ExportRecord) -> list[dict]:
    if not record.message_tools:
        return list(record.messages)
    turns = []
    for index, message in enumerate(record.messages):
        turn = dict(message)
        fields = record.message_tools.get(index, {})
        if message["role"] == "assistant" and fields.get("tool_calls"):
            calls = [
                openai_tool_call(call, fallback_id=f"call_{index}_{number}")
                for number, call in enumerate(fields["tool_calls"], start=1)
            ]
            if any(calls):
                turn["tool_calls"] = [call for call in calls if call]
        elif message["role"] == "tool":
            for name in ("tool_call_id", "name"):
                if isinstance(fields.get(name), str):
                    turn[name] = fields[name]
        turns.append(turn)
    return turns


def _tool_result(call: dict) -> str | None:
    for key in ("result", "output", "content"):
        value = call.get(key)
        if value is not None:
            return value if isinstance(value, str) else json_text(value)
    return None


def rollout_turns(record: ExportRecord) -> list[dict]:
    """The rated run's own tool calls: per call an assistant turn calling it and a tool turn with its result.

    The list is shared between formats: extend a copy (`+`), never the list itself.
    """
    return _cached(record, "rollout", (record.tool_calls,), _rollout_turns)


def _rollout_turns(record: ExportRecord) -> list[dict]:
    turns = []
    for number, call in enumerate(record.tool_calls or (), start=1):
        tool_call = openai_tool_call(call, fallback_id=f"call_{number}")
        if tool_call is None:
            continue
        turns.append({"role": "assistant", "content": "", "tool_calls": [tool_call]})
        # Every call gets its tool turn, empty when no result was recorded: chat APIs and templates
        # expect each call answered, and a prompt ending in a call would read as an unfinished answer.
        turns.append({"role": "tool", "tool_call_id": tool_call["id"], "content": _tool_result(call) or ""})
    return turns


def hint_turn(hint: str) -> dict[str, str]:
    # A user turn, not a system one: many chat templates accept a system turn only first.
    return {"role": "user", "content": f"Hint: {hint}"}
