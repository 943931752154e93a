"""Agent records and outcomes as ACP messages, and ACP params as checked values. Pure; no
trio import.

One function maps a session record to the `session/update` payloads it produces, for live
streaming and for `session/load` replay alike, so replayed output equals live output (except
that replay also shows the user's own messages, shows assistant text as one chunk per
message where live streaming sends each delta as it arrives, and takes a tool call from
`pending` straight to its result's status, where live streaming shows it `in_progress` once
its tool starts). Messages are plain dicts in the
wire shape of the ACP schema (`acp.schema`, which the tests validate against); importing the
pydantic models here would cost the server half a second of start-up.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

from .._errors import McpConfigError
from .._frozen import thaw
from .._mcp._config import McpServer, mcp_servers_from_acp
from .._shell._readable import readable
from .._store._records import (
    ASSISTANT_MESSAGE,
    STEP_START,
    TOOL_APPROVAL,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Record,
    decode_turn_end,
)
from ._jsonrpc import JsonRpcError

__all__ = [
    "PROTOCOL_VERSION",
    "STEERING",
    "STEERING_CAPABILITY",
    "agent_text_update",
    "assistant_message_id",
    "available_commands_update",
    "call_preview",
    "client_has_terminal",
    "client_name",
    "client_reads_files",
    "client_writes_files",
    "config_option_update",
    "current_mode_update",
    "initialize_result",
    "json_safe",
    "mcp_servers",
    "mcp_title",
    "replay_updates",
    "require_absolute",
    "require_cwd",
    "require_session_id",
    "stop_reason",
    "terminal_content",
    "terminal_update",
    "tool_call_title",
    "tool_kind",
    "tool_result_update",
    "tool_started_update",
    "turn_usage",
    "updates_for_record",
    "usage_update",
]

PROTOCOL_VERSION = 1
AGENT_NAME = "trio-agents"
MCP_CAPABILITIES: Mapping[str, bool] = {"http": True, "sse": True}
"""The MCP transports a session connects besides stdio (which every ACP agent supports)."""
STEERING_CAPABILITY = "unstable_session_inject"
STEERING: Mapping[str, Any] = {
    "modes": ["queue", "steer"],
    "methods": {"steer": "_trio-agents/steer", "queue": "_trio-agents/queue"},
    "outcome": "_trio-agents/prompt_outcome",
}
MCP_PREFIX = "mcp__"  # an MCP tool's name: `mcp__<server>__<tool>` (`mcp_tool_name`)


def initialize_result(version: str) -> dict[str, Any]:
    """Our answer to `initialize`, whatever version the client asked for (it negotiates down
    to ours)."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "mcpCapabilities": dict(MCP_CAPABILITIES),
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
            # Steering and queueing (D530): unstable, so under `_meta`, which the schema
            # leaves open. The proposal's `session/inject` with the modes it takes, and our
            # extension methods for a client that does not know the proposal.
            "_meta": {STEERING_CAPABILITY: dict(STEERING)},
        },
        "authMethods": [],
        "agentInfo": {"name": AGENT_NAME, "version": version},
    }


# -- params ------------------------------------------------------------------------------


def client_name(params: Mapping[str, Any]) -> str:
    """The client as an `initialize` request names it (`clientInfo`, or v2's `info`;
    optional in v1)."""
    info: object = params.get("clientInfo", params.get("info"))
    if isinstance(info, Mapping):
        named = cast("Mapping[str, Any]", info)
        name, version = named.get("name"), named.get("version")
        if isinstance(name, str):
            return f"{name} {version}" if isinstance(version, str) else name
    return "a client that gave no clientInfo"


def client_reads_files(params: Mapping[str, Any]) -> bool:
    """Whether an `initialize` request's client offers `fs/read_text_file`."""
    return _fs_capability(params, "readTextFile")


def client_writes_files(params: Mapping[str, Any]) -> bool:
    """Whether an `initialize` request's client offers `fs/write_text_file`."""
    return _fs_capability(params, "writeTextFile")


def client_has_terminal(params: Mapping[str, Any]) -> bool:
    """Whether an `initialize` request's client offers the `terminal/*` methods."""
    capabilities: object = params.get("clientCapabilities")
    return (
        isinstance(capabilities, Mapping)
        and cast("Mapping[str, Any]", capabilities).get("terminal") is True
    )


def _fs_capability(params: Mapping[str, Any], name: str) -> bool:
    capabilities: object = params.get("clientCapabilities")
    if not isinstance(capabilities, Mapping):
        return False
    fs: object = cast("Mapping[str, Any]", capabilities).get("fs")
    return isinstance(fs, Mapping) and cast("Mapping[str, Any]", fs).get(name) is True


def _plain(name: str, value: str) -> str:
    """`value`, if a file system or a database can take it: JSON strings may hold NUL and
    lone surrogates, which no path and no UTF-8 column can (D381)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise JsonRpcError.invalid_params(
            f"{name} must be valid Unicode text, got {value!r} (a lone surrogate)"
        ) from None
    if "\0" in value:
        raise JsonRpcError.invalid_params(f"{name} must not contain NUL, got {value!r}")
    return value


def require_session_id(params: Mapping[str, Any]) -> str:
    sid = params.get("sessionId")
    if not isinstance(sid, str) or not sid:
        raise JsonRpcError.invalid_params(f"sessionId must be a non-empty string, got {sid!r}")
    return _plain("sessionId", sid)


def require_absolute(name: str, value: str) -> str:
    """`value` normalised, if it is an absolute path a file system can take (D381)."""
    if not os.path.isabs(_plain(name, value)):
        raise JsonRpcError.invalid_params(f"{name} must be an absolute path: {value!r}")
    return os.path.normpath(value)


def require_cwd(params: Mapping[str, Any]) -> str:
    """The session's working directory: absolute, with no extra directories."""
    cwd = params.get("cwd")
    if not isinstance(cwd, str):
        raise JsonRpcError.invalid_params(f"cwd must be an absolute path: {cwd!r}")
    cwd = require_absolute("cwd", cwd)
    extra = params.get("additionalDirectories")
    if extra:
        raise JsonRpcError.invalid_params("additionalDirectories are not supported")
    return cwd


def mcp_servers(params: Mapping[str, Any]) -> tuple[McpServer, ...]:
    """The MCP servers a `session/new` or `session/load` asks for (none when absent). Raises
    JsonRpcError (invalid params) naming the entry and field of a malformed one."""
    try:
        return mcp_servers_from_acp(params.get("mcpServers", []))
    except McpConfigError as exc:
        raise JsonRpcError.invalid_params(str(exc)) from None


# -- updates -----------------------------------------------------------------------------


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def agent_text_update(text: str, message_id: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": _text(text), "messageId": message_id}


def assistant_message_id(turn: int, step: int) -> str:
    """The `messageId` of the assistant message of step `step` of turn `turn`: one per step,
    unique in the session, and derived from the records alone, so a replay tags a message
    as it was tagged live (D509)."""
    return f"assistant-{turn}-{step}"


def current_mode_update(mode: str) -> dict[str, Any]:
    return {"sessionUpdate": "current_mode_update", "currentModeId": mode}


def config_option_update(options: list[dict[str, Any]]) -> dict[str, Any]:
    return {"sessionUpdate": "config_option_update", "configOptions": options}


def available_commands_update(
    commands: Sequence[tuple[str, str, str | None]],
) -> dict[str, Any]:
    """The commands a session's model understands, from (name, description, input hint)."""
    return {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [
            {"name": name, "description": description}
            | ({"input": {"hint": hint}} if hint is not None else {})
            for name, description, hint in commands
        ],
    }


def tool_kind(name: str) -> str:
    if name.startswith(MCP_PREFIX):
        return "other"  # a server's tool may do anything: no name of ours says what
    if name == "bash":
        return "execute"
    if name.startswith("read") or name == "bash_output":
        return "read"
    if name.startswith("edit") or name == "write":
        return "edit"
    return "other"


TITLE_LENGTH = 200


def tool_call_title(name: str, arguments: Mapping[str, Any]) -> str:
    """What an editor shows for a call: a `bash` call's command, on one line and readable,
    with the workdir it asks for when it asks for one (the full command is the call's
    `rawInput`); an MCP tool's server and tool
    (`server: tool`); another tool's `description`, or its name and main argument (a
    command, a job id, a file's path), or its name."""
    mcp = mcp_title(name)
    if mcp is not None:
        return mcp
    command = arguments.get("command")
    if name == "bash" and isinstance(command, str) and command.strip():
        # Where it runs, when the model asked for another directory than the session's:
        # a permission request shows it before the user allows the command (D485).
        workdir = arguments.get("workdir")
        if isinstance(workdir, str) and workdir.strip() and os.path.normpath(workdir) != ".":
            return _one_line(f"{command} (in {workdir})")
        return _one_line(command)
    description = arguments.get("description")
    if isinstance(description, str) and description.strip():
        return _one_line(description)
    for key in ("command", "job_id", "path"):
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return _one_line(f"{name}: {value}")
    return name


def mcp_title(name: str) -> str | None:
    """`server: tool` for an MCP tool's name (`mcp__server__tool`), else None. Read from the
    name alone, so a replay titles a call as it was titled live, whatever servers the
    session has now; a server whose name holds `__` is cut at its first."""
    if not name.startswith(MCP_PREFIX):
        return None
    server, _, tool = name[len(MCP_PREFIX) :].partition("__")
    return f"{server}: {tool}" if server and tool else None


def _one_line(text: str) -> str:
    line = " ".join(readable(text).split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1] + "\u2026"


def tool_started_update(call_id: str) -> dict[str, Any]:
    """The update that shows a call running: its tool started (the `ToolStarted` event,
    after its approval if it needed one). Live only: a replay goes from `pending` to the
    result's status."""
    return {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress"}


def replay_updates(records: Iterable[Record], cwd: str | None = None) -> Iterator[dict[str, Any]]:
    """The `session/update` payloads that replay `records` (a `session/load`): what
    `updates_for_record` makes of each, with each message's `messageId`; `cwd` as there."""
    turn = step = 0
    for record in records:
        if record.type == STEP_START:
            turn, step = int(record.data["turn"]), int(record.data["step"])
        yield from updates_for_record(record, replay=True, step=(turn, step), cwd=cwd)


FILE_TOOLS = frozenset({"read", "edit", "write"})  # `FileTools`' tools, previewed by name


def call_preview(name: str, arguments: Mapping[str, Any], cwd: str | None) -> dict[str, Any]:
    """What a file tool's call shows before it runs (its `tool_call` and permission
    request): the file it names as `locations` (a relative path joined to `cwd`) and, for
    `edit` and `write`, the change it asks for as `diff` content: `old_string` to
    `new_string`, or the whole `content` with no old text (the file is read only when the
    tool runs; its result's diff then shows what it replaced). From the arguments alone, so
    a replay shows what was shown live (D520). Empty for any other call."""
    path = arguments.get("path")
    if name not in FILE_TOOLS or not isinstance(path, str) or not _usable(path):
        return {}
    if not os.path.isabs(path):
        if cwd is None:
            return {}
        path = os.path.join(cwd, path)
    path = os.path.normpath(path)
    preview: dict[str, Any] = {"locations": [{"path": path}]}
    old, new = arguments.get("old_string"), arguments.get("new_string")
    content = arguments.get("content")
    if name == "edit" and isinstance(old, str) and isinstance(new, str):
        preview["content"] = [{"type": "diff", "path": path, "oldText": old, "newText": new}]
    elif name == "write" and isinstance(content, str):
        preview["content"] = [{"type": "diff", "path": path, "newText": content}]
    return preview


def _usable(path: str) -> bool:
    """Whether a file name can hold `path` (no NUL, no lone surrogate, D381)."""
    if not path or "\0" in path:
        return False
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def updates_for_record(
    record: Record, *, replay: bool, step: tuple[int, int] = (0, 0), cwd: str | None = None
) -> list[dict[str, Any]]:
    """The `session/update` payloads a record produces. Live (`replay=False`), assistant text
    is sent as it streams (see `agent_text_update`), and the user's own prompt is not echoed
    back; in a replay both come from the records, an assistant message tagged with the
    `messageId` of its `step` (turn, step). `cwd` is the session's working directory, which
    a file tool's relative path is taken from (`call_preview`)."""
    data = record.data
    if record.type == USER_MESSAGE:
        if not replay:
            return []
        update = {"sessionUpdate": "user_message_chunk", "content": _text(str(data["content"]))}
        message_id = data.get("id")
        return [update | {"messageId": message_id} if isinstance(message_id, str) else update]
    if record.type == ASSISTANT_MESSAGE:
        content = str(data.get("content", ""))
        if not (replay and content):
            return []
        return [agent_text_update(content, assistant_message_id(*step))]
    if record.type == TOOL_CALL:
        arguments: Any = thaw(data.get("arguments", {}))
        name = str(data["name"])
        named: Mapping[str, Any] = (
            cast("Mapping[str, Any]", arguments) if isinstance(arguments, dict) else {}
        )
        return [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": str(data["call_id"]),
                "title": tool_call_title(name, named),
                "kind": tool_kind(name),
                # Not running yet: its approval, if it needs one, comes first.
                "status": "pending",
                "rawInput": json_safe(arguments),
                **call_preview(name, named, cwd),
            }
        ]
    if record.type == TOOL_RESULT:
        return [tool_result_update(record, live=not replay)]
    return []


def terminal_content(terminal_id: str) -> dict[str, Any]:
    """A client terminal as a tool call shows it: the client shows its output live, and
    keeps showing it after the terminal is released."""
    return {"type": "terminal", "terminalId": terminal_id}


def terminal_update(call_id: str, terminal_id: str) -> dict[str, Any]:
    """The update that embeds the client terminal a call's command runs in (D551)."""
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "content": [terminal_content(terminal_id)],
    }


def tool_result_update(record: Record, *, live: bool = False) -> dict[str, Any]:
    """A `tool/result` as the call's last update: `failed` for an error result (the tool
    failed, the call was rejected or interrupted, a command exited non-zero), else
    `completed`; its text made readable (`readable`) as the content and, with the flags
    the record carries, as `rawOutput`. `live`: the client terminal the command ran in
    (`details.terminal`) comes first, since the update replaces the call's content and the
    client keeps showing a released terminal; a replay leaves it out, as that terminal was
    another connection's (D551)."""
    data = record.data
    failed = bool(data.get("is_error"))
    output = readable(str(data["content"]))
    raw: dict[str, Any] = {"output": output, "is_error": failed}
    for flag in ("rejected", "interrupted"):
        if data.get(flag) is True:
            raw[flag] = True
    details = data.get("details")
    diff, locations = _shown_details(details)
    terminal = _terminal_of(details) if live else None
    shown = [terminal_content(terminal)] if terminal is not None else []
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": str(data["call_id"]),
        "status": "failed" if failed else "completed",
        "content": [*shown, *diff, {"type": "content", "content": _text(output)}],
        "rawOutput": raw,
    }
    if locations:
        update["locations"] = locations
    return update


def _shown_details(details: object) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A result's `details` (`ToolResult.details`) as ACP shows them: its `diff` as `diff`
    content, its `locations` as locations. Read defensively: a record may come from any
    writer, and what does not have the documented shape is left out."""
    if not isinstance(details, Mapping):
        return [], []
    fields = cast("Mapping[str, Any]", details)
    diff: list[dict[str, Any]] = []
    change: object = fields.get("diff")
    if isinstance(change, Mapping):
        parts = cast("Mapping[str, Any]", change)
        path, old, new = parts.get("path"), parts.get("old_text"), parts.get("new_text")
        if _absolute(path) and isinstance(new, str) and (old is None or isinstance(old, str)):
            shown = {"type": "diff", "path": path, "newText": new}
            diff.append(shown if old is None else {**shown, "oldText": old})
    locations: list[dict[str, Any]] = []
    listed: object = fields.get("locations")
    if isinstance(listed, Sequence) and not isinstance(listed, str):
        for item in cast("Sequence[object]", listed):
            if not isinstance(item, Mapping):
                continue
            place = cast("Mapping[str, Any]", item)
            path, line = place.get("path"), place.get("line")
            if not _absolute(path):
                continue
            if type(line) is int and 0 <= line < 2**32:
                locations.append({"path": path, "line": line})
            else:
                locations.append({"path": path})
    return diff, locations


def _terminal_of(details: object) -> str | None:
    """The client terminal id a result's `details` name, if they name one."""
    if not isinstance(details, Mapping):
        return None
    terminal: object = cast("Mapping[str, Any]", details).get("terminal")
    return terminal if isinstance(terminal, str) and terminal else None


def _absolute(path: object) -> bool:
    return isinstance(path, str) and _usable(path) and os.path.isabs(path)


def json_safe(value: Any) -> Any:
    """`value` if it is strict JSON (no NaN or Infinity), else its repr."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return repr(value)
    return value


def usage_update(record: Record, context_window: int | None) -> dict[str, Any] | None:
    """The `usage_update` an assistant message's record makes: the tokens in context now
    (the request the model was sent and its reply), out of `context_window`; None when the
    model reported no usage or the window is not known (the protocol wants both)."""
    usage = record.data.get("usage") if record.type == ASSISTANT_MESSAGE else None
    if context_window is None or not isinstance(usage, Mapping):
        return None
    counts = cast("Mapping[str, Any]", usage)
    used = int(counts.get("input_tokens", 0)) + int(counts.get("output_tokens", 0))
    return {"sessionUpdate": "usage_update", "used": used, "size": context_window}


# -- outcomes ----------------------------------------------------------------------------


def turn_usage(records: Sequence[Record]) -> dict[str, int] | None:
    """The tokens of the model calls in `records` (a prompt's turn), as the prompt's answer
    carries them (`usage`, unstable in ACP v1); None when no call reported usage."""
    input_tokens = output_tokens = 0
    reported = False
    for record in records:
        usage = record.data.get("usage") if record.type == ASSISTANT_MESSAGE else None
        if isinstance(usage, Mapping):
            counts = cast("Mapping[str, Any]", usage)
            input_tokens += int(counts.get("input_tokens", 0))
            output_tokens += int(counts.get("output_tokens", 0))
            reported = True
    if not reported:
        return None
    return {
        "totalTokens": input_tokens + output_tokens,
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
    }


def stop_reason(
    records: Sequence[Record], message_id: str, *, cancel_requested: bool
) -> str | JsonRpcError:
    """How the prompt `message_id` ended, as an ACP stop reason, or the error to answer it
    with. A prompt the client cancelled is `cancelled` however its turn ended; so is one whose
    turn never started (cancelled while queued, or the agent closed), and one whose turn a
    permission request's `cancelled` answer ended."""
    turn: int | None = None
    current: int | None = None
    finish: str | None = None
    end: Mapping[str, Any] | None = None
    approval_cancelled = False
    # Start at the prompt's turn (found from the end: it is recent), not at the beginning.
    start = 0
    for index in range(len(records) - 1, -1, -1):
        record = records[index]
        if record.type == USER_MESSAGE and record.data.get("id") == message_id:
            start = max(0, index - 1)
            break
    for record in itertools.islice(records, start, None):
        if record.type == TURN_START:
            current = int(record.data["turn"])
        elif record.type == USER_MESSAGE and record.data.get("id") == message_id:
            turn = current
        elif turn is not None and current == turn:
            if record.type == ASSISTANT_MESSAGE:
                finish = record.data.get("finish")
            elif record.type == TOOL_APPROVAL and record.data.get("decision") == "cancel":
                approval_cancelled = True
            elif record.type == TURN_END and record.data.get("turn") == turn:
                end = record.data["reason"]
                break
    if cancel_requested or end is None or approval_cancelled:
        return "cancelled"
    reason = decode_turn_end(end)
    if reason is None:
        return "end_turn"  # a kind from a newer writer: the turn is over, nothing failed
    match reason["kind"]:
        case "error":
            return JsonRpcError.internal(f"turn failed: {reason['message']}")
        case "max_steps":
            return "max_turn_requests"
        case "closed" | "interrupted":
            return "cancelled"
        case "completed":
            return "max_tokens" if finish == "length" else "end_turn"
        case "aborted":
            return "end_turn"  # aborted by something other than this client
