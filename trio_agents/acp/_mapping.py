"""Agent records and outcomes as ACP messages, and ACP params as checked values. Pure; no
trio import.

One function maps a session record to the `session/update` payloads it produces, for live
streaming and for `session/load` replay alike, so replayed output equals live output (except
that replay also shows the user's own messages, and shows assistant text as one chunk per
message where live streaming sends each delta as it arrives). Messages are plain dicts in the
wire shape of the ACP schema (`acp.schema`, which the tests validate against); importing the
pydantic models here would cost the server half a second of start-up.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, cast

from .._records import (
    ASSISTANT_MESSAGE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Record,
    decode_turn_end,
    thaw,
)
from ._jsonrpc import JsonRpcError

__all__ = [
    "PROTOCOL_VERSION",
    "agent_text_update",
    "available_commands_update",
    "initialize_result",
    "require_cwd",
    "require_session_id",
    "stop_reason",
    "tool_kind",
    "updates_for_record",
]

PROTOCOL_VERSION = 1
AGENT_NAME = "trio-agents"


def initialize_result(version: str) -> dict[str, Any]:
    """Our answer to `initialize`, whatever version the client asked for (it negotiates down
    to ours)."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "sessionCapabilities": {"list": {}},
        },
        "authMethods": [],
        "agentInfo": {"name": AGENT_NAME, "version": version},
    }


# -- params ------------------------------------------------------------------------------


def require_session_id(params: Mapping[str, Any]) -> str:
    sid = params.get("sessionId")
    if not isinstance(sid, str) or not sid:
        raise JsonRpcError.invalid_params(f"sessionId must be a non-empty string, got {sid!r}")
    return sid


def require_cwd(params: Mapping[str, Any]) -> str:
    """The session's working directory: absolute, with no extra directories or MCP servers
    (this agent runs its tools itself)."""
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise JsonRpcError.invalid_params(f"cwd must be an absolute path: {cwd!r}")
    servers = params.get("mcpServers", [])
    if not isinstance(servers, list):
        raise JsonRpcError.invalid_params(f"mcpServers must be a list, got {servers!r}")
    if servers:
        raise JsonRpcError.invalid_params("MCP servers are not supported; send mcpServers: []")
    extra = params.get("additionalDirectories")
    if extra:
        raise JsonRpcError.invalid_params("additionalDirectories are not supported")
    return os.path.normpath(cwd)


# -- updates -----------------------------------------------------------------------------


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def agent_text_update(text: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": _text(text)}


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
    if name == "bash":
        return "execute"
    if name.startswith("read") or name == "bash_output":
        return "read"
    if name.startswith("edit") or name == "write":
        return "edit"
    return "other"


def _title(name: str, arguments: Mapping[str, Any]) -> str:
    description = arguments.get("description")
    if isinstance(description, str) and description.strip():
        return description.strip()
    command = arguments.get("command")
    if isinstance(command, str) and command.strip():
        return f"{name}: {command.strip()[:80]}"
    return name


def updates_for_record(record: Record, *, replay: bool) -> list[dict[str, Any]]:
    """The `session/update` payloads a record produces. Live (`replay=False`), assistant text
    is sent as it streams (see `agent_text_update`), and the user's own prompt is not echoed
    back; in a replay both come from the records."""
    data = record.data
    if record.type == USER_MESSAGE:
        if not replay:
            return []
        return [{"sessionUpdate": "user_message_chunk", "content": _text(str(data["content"]))}]
    if record.type == ASSISTANT_MESSAGE:
        content = str(data.get("content", ""))
        return [agent_text_update(content)] if replay and content else []
    if record.type == TOOL_CALL:
        arguments: Any = thaw(data.get("arguments", {}))
        name = str(data["name"])
        return [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": str(data["call_id"]),
                "title": _title(
                    name,
                    cast("Mapping[str, Any]", arguments) if isinstance(arguments, dict) else {},
                ),
                "kind": tool_kind(name),
                "status": "in_progress",
                "rawInput": _json_safe(arguments),
            }
        ]
    if record.type == TOOL_RESULT:
        return [
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": str(data["call_id"]),
                "status": "failed" if data.get("is_error") else "completed",
                "content": [{"type": "content", "content": _text(str(data["content"]))}],
            }
        ]
    return []


def _json_safe(value: Any) -> Any:
    """`value` if it is strict JSON (no NaN or Infinity), else its repr."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return repr(value)
    return value


# -- outcomes ----------------------------------------------------------------------------


def stop_reason(
    records: Sequence[Record], message_id: str, *, cancel_requested: bool
) -> str | JsonRpcError:
    """How the prompt `message_id` ended, as an ACP stop reason, or the error to answer it
    with. A prompt the client cancelled is `cancelled` however its turn ended; one whose turn
    never started (cancelled while queued, or the agent closed) is `cancelled` too."""
    turn: int | None = None
    current: int | None = None
    finish: str | None = None
    end: Mapping[str, Any] | None = None
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
            elif record.type == TURN_END and record.data.get("turn") == turn:
                end = record.data["reason"]
                break
    if cancel_requested or end is None:
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
