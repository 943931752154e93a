"""ACP v2 (the draft, `@agentclientprotocol/sdk` 2.4.0's `schema/v2`), spoken on a connection
whose client asks for it in `initialize` (D526). Pure; no trio import.

The server's sessions and turns are the same in both versions; what differs is on the wire,
and this module is that difference, as functions of what the v1 server would send:

- `initialize` answers `info` and `capabilities`, where every capability is an object
  (`{}`: supported) and `loadSession`, `fs`, `terminal` and the mode list are gone;
- a `session/prompt` is answered as soon as it is accepted, with a receipt (`messageId`),
  and its turn is told in `state_update`s: `running`, `requires_action` while a
  permission request waits, and one `idle` with the stop reason the v1 answer would carry;
- a tool call begins with a `tool_call_update`, a diff is a list of changes and a patch,
  a config option is named by `configId`, a command says its `type`, and the mode update
  (modes are a config option now) is not sent;
- `session/load`, `session/set_mode` and `authenticate` are not v2 methods; a session's
  history is replayed by `session/resume` with `replayFrom: {"type": "start"}`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from . import _mapping as m
from ._jsonrpc import JsonRpcError

__all__ = [
    "PROTOCOL_V1",
    "PROTOCOL_V2",
    "V1_ONLY",
    "ends_turn",
    "idle",
    "initialize_result",
    "negotiate",
    "permission_params",
    "replays",
    "requires_action",
    "result",
    "running",
    "update",
    "user_message",
]

PROTOCOL_V1: Final = 1
PROTOCOL_V2: Final = 2
V1_ONLY: Final = frozenset({"session/load", "session/set_mode", "authenticate"})
"""Methods v1 has and v2 does not: on a v2 connection they are not found (-32601)."""


def negotiate(requested: int) -> int:
    """The version a connection speaks after an `initialize` asking for `requested`: the
    highest this agent speaks at or below it, and v1 for a client asking for less than 1
    (v1's rule: the agent answers the latest it supports, and such a client disconnects)."""
    return PROTOCOL_V2 if requested >= PROTOCOL_V2 else PROTOCOL_V1


def initialize_result(version: str) -> dict[str, Any]:
    """Our answer to a v2 `initialize`: what `_mapping.initialize_result` says, in v2's
    shape. `session` promises `session/new`, `list`, `resume`, `close`, `prompt`, `cancel`
    and `update`; `delete` and the prompt and MCP markers are each an object."""
    return {
        "protocolVersion": PROTOCOL_V2,
        "info": {"name": m.AGENT_NAME, "version": version},
        "capabilities": {
            "session": {
                "prompt": {"embeddedContext": {}},
                "mcp": {"stdio": {}, "http": {}},
                "delete": {},
            },
            "_meta": {m.STEERING_CAPABILITY: dict(m.STEERING)},
        },
        "authMethods": [],
    }


# -- a turn's states ---------------------------------------------------------------------


def running() -> dict[str, Any]:
    return {"sessionUpdate": "state_update", "state": "running"}


def requires_action() -> dict[str, Any]:
    return {"sessionUpdate": "state_update", "state": "requires_action"}


def idle(answer: Mapping[str, Any] | JsonRpcError) -> dict[str, Any]:
    """The `idle` that ends a turn, from what v1 would answer its prompt: the stop reason
    and the tokens used, or an error, as the stop reason `error` carrying it."""
    if isinstance(answer, JsonRpcError):
        return {
            "sessionUpdate": "state_update",
            "state": "idle",
            "stopReason": "error",
            "error": {"code": answer.code, "message": answer.detail},
        }
    return {"sessionUpdate": "state_update", "state": "idle", **answer}


def ends_turn(answer: object) -> bool:
    """Whether a permission request's answer ends the turn (the `cancelled` outcome): the
    turn does not run again, so `running` is not sent, only the `idle` that follows."""
    if not isinstance(answer, Mapping):
        return False
    outcome = cast("Mapping[str, Any]", answer).get("outcome")
    if not isinstance(outcome, Mapping):
        return False
    return cast("Mapping[str, Any]", outcome).get("outcome") == "cancelled"


def user_message(message_id: str, prompt: Sequence[Any]) -> dict[str, Any]:
    """Where an accepted prompt was inserted: the user message, whole, with its id (the
    receipt's `messageId`)."""
    return {"sessionUpdate": "user_message", "messageId": message_id, "content": list(prompt)}


# -- translation of what the v1 server sends ------------------------------------------------


def update(v1: Mapping[str, Any]) -> dict[str, Any] | None:
    """`v1`, a v1 `session/update` payload, as v2 sends it; None for one v2 does not have
    (the mode update: the mode is the `mode` config option, whose update is sent too)."""
    kind = v1.get("sessionUpdate")
    out = dict(v1)
    if kind == "current_mode_update":
        return None
    if kind in ("tool_call", "tool_call_update"):
        return _tool_call(out)
    if kind == "config_option_update":
        out["configOptions"] = _config_options(out.get("configOptions"))
    elif kind == "available_commands_update":
        out["availableCommands"] = [_command(c) for c in _objects(out.get("availableCommands"))]
    elif kind == "plan":
        out = {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": "plan", "entries": out.get("entries", [])},
        }
    elif kind == "user_message_chunk" and "messageId" not in out:
        return None  # a v2 chunk needs its message's id, and a record without one has none
    return out


def result(method: str, v1: object) -> object:
    """The result of `method` as v2 answers it, from the v1 server's: no `modes` (a config
    option now), each config option by `configId`."""
    if method not in _RESULTS or not isinstance(v1, Mapping):
        return v1
    out = {k: v for k, v in cast("Mapping[str, Any]", v1).items() if k != "modes"}
    if "configOptions" in out:
        out["configOptions"] = _config_options(out["configOptions"])
    return out


_RESULTS: Final = frozenset({"session/new", "session/resume", "session/set_config_option"})


def replays(params: Mapping[str, Any]) -> bool:
    """Whether a v2 `session/resume` replays the session's history before it answers:
    `replayFrom` `{"type": "start"}` does; absent or null, it does not. Raises
    JsonRpcError (invalid params) for any other value."""
    replay = params.get("replayFrom")
    if replay is None:
        return False
    if isinstance(replay, Mapping) and cast("Mapping[str, Any]", replay).get("type") == "start":
        return True
    raise JsonRpcError.invalid_params(
        f'replayFrom must be {{"type": "start"}} or null, got {replay!r}'
    )


def permission_params(v1: Mapping[str, Any]) -> dict[str, Any]:
    """A v1 `session/request_permission`'s params as v2 asks: a title, and the tool call
    as the request's subject."""
    call = _objects([v1.get("toolCall")])
    title = call[0].get("title") if call else None
    out: dict[str, Any] = {
        "sessionId": v1.get("sessionId"),
        "title": title if isinstance(title, str) and title else "Allow this tool call?",
        "options": v1.get("options", []),
    }
    if call:
        shown = _tool_call(dict(call[0]))
        shown.pop("sessionUpdate", None)
        out["subject"] = {"type": "tool_call", "toolCall": shown}
    return out


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    if "sessionUpdate" in call:
        call["sessionUpdate"] = "tool_call_update"  # v2 has no `tool_call`: the first update
    if isinstance(call.get("content"), list):
        call["content"] = [_content(c) for c in _objects(call["content"])]
    return call


def _content(item: Mapping[str, Any]) -> dict[str, Any]:
    """A v1 diff (`path`, `oldText`, `newText`) as v2's: the change, and a git patch."""
    if item.get("type") != "diff":
        return dict(item)
    path = str(item.get("path", ""))
    old, new = item.get("oldText"), str(item.get("newText", ""))
    added = not isinstance(old, str)
    before = old if isinstance(old, str) else ""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        new.splitlines(keepends=True),
        "/dev/null" if added else f"a{path}",
        f"b{path}",
    )
    header = f"diff --git a{path} b{path}\n" + ("new file mode 100644\n" if added else "")
    patch = header + "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return {
        "type": "diff",
        "changes": [{"operation": "add" if added else "modify", "path": path}],
        "patch": {"format": "git_patch", "text": patch},
    }


def _config_options(options: object) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for option in _objects(options):
        shown = {k: v for k, v in option.items() if k != "id"}
        out.append({"configId": option.get("id"), **shown})
    return out


def _command(command: Mapping[str, Any]) -> dict[str, Any]:
    out = {"type": "command", **command}
    hint = command.get("input")
    if isinstance(hint, Mapping):
        out["input"] = {"type": "text", **cast("Mapping[str, Any]", hint)}
    return out


def _objects(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    items = cast("list[object]", value)
    return [cast("Mapping[str, Any]", v) for v in items if isinstance(v, Mapping)]
