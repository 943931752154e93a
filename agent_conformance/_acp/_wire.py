"""The ACP wire as the ACP machine checks it: every message, both ways, against the newest
published ACP schema (`_schema`) of the version the connection speaks, and the frames the
client sends. Pure: no trio.

`check_from_agent` says what is wrong with one line the agent wrote (None: nothing);
`check_from_client` does the same for ours, so a frame the suite builds wrong is the suite's
bug, raised at once, never blamed on the agent.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn, cast

from . import _schema as schema

__all__ = [
    "RESPONSES",
    "check_error",
    "check_from_agent_message",
    "check_from_client",
    "cut_value",
    "dig",
    "frame",
    "methods",
    "parse_line",
    "stamp",
    "tool_status_step",
    "update_kinds",
]

_stamps = itertools.count(1)


def stamp() -> int:
    """A number that orders what the client and the endpoint saw (a permission request
    after the model call whose tool it asks about), whoever saw it."""
    return next(_stamps)


def _by_method(version: int, side: str, suffix: str) -> dict[str, str]:
    """The schema's definitions of one side's methods, by method: `side` is who handles the
    method (`agent`, `client`, `protocol`), `suffix` the kind (`Request`, `Response`,
    `Notification`)."""
    return {
        spec["x-method"]: name
        for name, spec in schema.definitions(version).items()
        if spec.get("x-side") == side and name.endswith(suffix) and "x-method" in spec
    }


# Methods of the client side the schema has only as unstable (MCP over ACP): an agent may
# call them; a client that does not take them answers so.
_UNSTABLE_TO_CLIENT: Final = ("mcp/connect", "mcp/message", "mcp/disconnect")


@dataclass(frozen=True)
class Methods:
    """The methods of one protocol version, each with its schema definition."""

    requests_to_agent: Mapping[str, str]
    notifications_to_agent: Mapping[str, str]
    responses: Mapping[str, str]
    """The definition of the result of each request the client sends."""
    requests_to_client: Mapping[str, str]
    client_responses: Mapping[str, str]
    notifications_to_client: Mapping[str, str]
    known_to_client: frozenset[str]


@functools.cache
def methods(version: int = 1) -> Methods:
    """Protocol `version`'s methods, from its schema."""
    to_client = _by_method(version, "client", "Request")
    notified = {
        **_by_method(version, "client", "Notification"),
        **_by_method(version, "protocol", "Notification"),
    }
    return Methods(
        requests_to_agent=_by_method(version, "agent", "Request"),
        notifications_to_agent={
            **_by_method(version, "agent", "Notification"),
            **_by_method(version, "protocol", "Notification"),
        },
        responses=_by_method(version, "agent", "Response"),
        requests_to_client=to_client,
        client_responses=_by_method(version, "client", "Response"),
        notifications_to_client=notified,
        known_to_client=frozenset({*to_client, *notified, *_UNSTABLE_TO_CLIENT}),
    )


@functools.cache
def update_kinds(version: int = 1) -> frozenset[str]:
    """The `sessionUpdate` kinds protocol `version`'s schema names."""
    kinds: set[str] = set()
    for branch in schema.definitions(version)["SessionUpdate"].get("anyOf", []):
        const = dig(branch, "properties", "sessionUpdate", "const")
        if isinstance(const, str):
            kinds.add(const)
    return frozenset(kinds)


_V1 = methods(1)
REQUESTS_TO_AGENT: Mapping[str, str] = _V1.requests_to_agent
NOTIFICATIONS_TO_AGENT: Mapping[str, str] = _V1.notifications_to_agent
RESPONSES: Mapping[str, str] = _V1.responses
"""The v1 schema's definition of the result of each request the client sends."""
REQUESTS_TO_CLIENT: Mapping[str, str] = _V1.requests_to_client
CLIENT_RESPONSES: Mapping[str, str] = _V1.client_responses
NOTIFICATIONS_TO_CLIENT: Mapping[str, str] = _V1.notifications_to_client


def dig(value: object, *keys: str) -> Any:
    """`value[k1][k2]...` through JSON objects; None where a key or an object is missing."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = cast("dict[str, Any]", value).get(key)
    return value


def frame(**fields: Any) -> bytes:
    """One JSON-RPC 2.0 line."""
    return json.dumps({"jsonrpc": "2.0", **fields}, separators=(",", ":")).encode() + b"\n"


def _not_json(constant: str) -> NoReturn:
    # Python reads NaN and Infinity; JSON (RFC 8259) has no such numbers.
    raise ValueError(f"{constant} is not a JSON number")


def parse_line(line: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """A line the agent wrote as a JSON-RPC 2.0 message, or what is wrong with it."""
    try:
        value = json.loads(line, parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return None, f"a line that is not JSON ({type(exc).__name__}): {_cut(line)}"
    if not isinstance(value, dict):
        return None, f"a line that is not a JSON object: {_cut(line)}"
    message: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
    if message.get("jsonrpc") != "2.0":
        return None, f'a message without "jsonrpc": "2.0": {_cut(line)}'
    return message, None


def check_from_agent_message(
    message: Mapping[str, Any], answers: str | None, version: int = 1
) -> str | None:
    """What is wrong with a message the agent sent, against protocol `version`'s schema.
    `answers` is the method of our request a response answers (None: not a response to a
    request of ours)."""
    known = methods(version)
    method = message.get("method")
    if method is None:
        if "error" in message:
            return check_error(message.get("error"), version)
        if "result" not in message:
            return f"a message with neither method, result nor error: {cut_value(message)}"
        definition = known.responses.get(answers) if answers is not None else None
        return _invalid(definition, message["result"], f"the result of {answers}", version)
    if not isinstance(method, str):
        return f"a method that is not a string: {cut_value(message)}"
    params = message.get("params", {})
    if "id" in message:
        definition = known.requests_to_client.get(method)
    else:
        definition = known.notifications_to_client.get(method)
    if definition is None:
        if method.startswith("_") or method in known.known_to_client:
            return None  # an extension method, or one this client does not take: answered
        return f"a method the client side of ACP v{version} does not have: {method!r}"
    return _invalid(definition, params, method, version)


# A tool call's statuses in the order they may come; completed and failed are both final.
STATUS_RANK: Mapping[str, int] = {"pending": 0, "in_progress": 1, "completed": 2, "failed": 2}


def tool_status_step(
    statuses: dict[tuple[str, str], str], session_id: str, update: Mapping[str, Any]
) -> str | None:
    """Record what a `tool_call` or `tool_call_update` of `session_id` says about its call's
    status in `statuses` ((session, toolCallId) -> last status), and say what is wrong with
    it (rule P14), or None. A `tool_call` starts its call anew (a load replays them); an
    update must name a call announced so, and may only move its status forward."""
    kind = update.get("sessionUpdate")
    call = update.get("toolCallId")
    status = update.get("status")
    if kind not in ("tool_call", "tool_call_update") or not isinstance(call, str):
        return None
    if status is not None and status not in STATUS_RANK:
        return None  # not a shape the schema allows: P7 says so
    key = (session_id, call)
    if kind == "tool_call":
        statuses[key] = status if isinstance(status, str) else "pending"
        return None
    last = statuses.get(key)
    if last is None:
        return f"a tool_call_update names call {call!r}, never announced by a tool_call"
    if not isinstance(status, str) or status == last:
        return None
    if STATUS_RANK[status] <= STATUS_RANK[last]:
        return f"tool call {call!r} went from {last} back to {status}"
    statuses[key] = status
    return None


def check_error(error: object, version: int = 1) -> str | None:
    """What is wrong with a JSON-RPC error object (code, message, optional data)."""
    return _invalid("Error", error, "a JSON-RPC error", version)


def check_from_client(
    method: str, params: object, *, response_to: str | None = None, version: int = 1
) -> None:
    """Raise AssertionError if a frame the suite sends is not valid ACP of protocol
    `version` (the suite's bug)."""
    known = methods(version)
    if response_to is not None:
        definition = known.client_responses.get(response_to)
    else:
        definition = known.requests_to_agent.get(method) or known.notifications_to_agent.get(method)
    problem = _invalid(definition, params, response_to or method, version)
    if problem is not None:
        raise AssertionError(f"the ACP machine built an invalid frame: {problem}")


def _invalid(definition: str | None, value: object, what: str, version: int = 1) -> str | None:
    if definition is None:
        return None
    found = schema.problem(definition, value, version)
    if found is None:
        return None
    shown = "ACP" if version == 1 else f"ACP v{version}"
    return f"{what} is not valid {shown} ({found}): {cut_value(value)}"


def _cut(line: bytes, limit: int = 200) -> str:
    text = line.decode("utf-8", "replace")
    return repr(text if len(text) <= limit else text[:limit] + "...")


def cut_value(value: object, limit: int = 300) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "..."
