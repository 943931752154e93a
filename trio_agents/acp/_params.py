"""The params of every ACP request this agent answers, checked against the shapes of the ACP
schema (`acp.schema`, schema v1.19) before anything is done with them. Pure; no trio import.

`check(method, params)` raises the `-32602` error that names the first field that does not
match: its path (`prompt[0].resource.text`), what it must be, and what came. A method not in
`SHAPES` is not checked here (it is answered `-32601`, or checked by its own handler).

The checks are written out rather than run through the SDK's pydantic models: importing
`acp.schema` costs about 0.8 s of CPU, more than doubling the server's start-up
(benchmarks/acp_startup.py), in every editor and every test that spawns one, and it would
make a pinned test dependency a runtime one (design D205). The test suite holds them to the
SDK: whatever `acp.schema` rejects, this rejects too (tests/test_acp_params.py). Where the
SDK coerces, this does not: an integer is a JSON integer (not `"1"`, `1.0` or `true`), as the
JSON schema says. Parts of the params this agent never reads (the client's capabilities
other than `fs` and `terminal`, each MCP server's fields, `_meta`) are checked as far as their
type (an object, a list), no deeper.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from ._jsonrpc import JsonRpcError

__all__ = ["SHAPES", "V2_SHAPES", "check"]

Shape = Callable[[Any, str], None]  # raises JsonRpcError naming the path, or returns


def _fail(path: str, wanted: str, value: Any) -> JsonRpcError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return JsonRpcError.invalid_params(f"{path or 'params'} must be {wanted}, got {shown}")


def _string(value: Any, path: str) -> None:
    if not isinstance(value, str):
        raise _fail(path, "a string", value)


def _boolean(value: Any, path: str) -> None:
    if not isinstance(value, bool):
        raise _fail(path, "true or false", value)


def _integer(low: int, high: int | None = None) -> Shape:
    wanted = f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}"

    def check(value: Any, path: str) -> None:
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < low
            or (high is not None and value > high)
        ):
            raise _fail(path, wanted, value)

    return check


def _number(value: Any, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(path, "a number", value)


def _one_of(*values: str) -> Shape:
    wanted = " or ".join(repr(v) for v in values)

    def check(value: Any, path: str) -> None:
        if value not in values:
            raise _fail(path, wanted, value)

    return check


def _any_object(value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise _fail(path, "an object", value)


def _anything(value: Any, path: str) -> None:
    pass


def _list(item: Shape) -> Shape:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, list):
            raise _fail(path, "a list", value)
        elements: list[Any] = value  # pyright: ignore[reportUnknownVariableType]
        for index, element in enumerate(elements):
            item(element, f"{path}[{index}]")

    return check


def _object(required: Mapping[str, Shape], optional: Mapping[str, Shape] | None = None) -> Shape:
    """An object with these fields. An optional field may be null (the schema's `Option`);
    unknown fields are allowed (ACP is extended through them, and through `_meta`)."""
    optional = {"_meta": _anything, **(optional or {})}

    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise _fail(path, "an object", value)
        fields = cast("dict[str, Any]", value)
        prefix = f"{path}." if path else ""
        for name, shape in required.items():
            if name not in fields:
                raise JsonRpcError.invalid_params(f"{prefix}{name} is required")
            shape(fields[name], prefix + name)
        for name, shape in optional.items():
            if fields.get(name) is not None:
                shape(fields[name], prefix + name)

    return check


def _tagged(tag: str, variants: Mapping[str, Shape]) -> Shape:
    """One of several objects, told apart by the string field `tag`."""
    kinds = ", ".join(repr(kind) for kind in variants)

    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise _fail(path, "an object", value)
        kind = cast("dict[str, Any]", value).get(tag)
        variant = variants.get(kind) if isinstance(kind, str) else None
        if variant is None:
            raise _fail(f"{path}.{tag}", f"one of {kinds}", kind)
        variant(value, path)

    return check


_ANNOTATIONS = _object(
    {}, {"audience": _list(_string), "lastModified": _string, "priority": _number}
)
_TEXT_CONTENTS = _object({"uri": _string, "text": _string}, {"mimeType": _string})
_BLOB_CONTENTS = _object({"uri": _string, "blob": _string}, {"mimeType": _string})


def _resource_contents(value: Any, path: str) -> None:
    """Text or blob contents: the schema's untagged union, told apart by its fields."""
    if isinstance(value, dict) and "text" not in value and "blob" not in value:
        raise JsonRpcError.invalid_params(f"{path}.text or {path}.blob is required")
    if isinstance(value, dict) and "text" not in value:
        _BLOB_CONTENTS(value, path)
    else:
        _TEXT_CONTENTS(value, path)


CONTENT_BLOCK = _tagged(
    "type",
    {
        "text": _object({"text": _string}, {"annotations": _ANNOTATIONS}),
        "image": _object(
            {"data": _string, "mimeType": _string}, {"uri": _string, "annotations": _ANNOTATIONS}
        ),
        "audio": _object({"data": _string, "mimeType": _string}, {"annotations": _ANNOTATIONS}),
        "resource_link": _object(
            {"uri": _string, "name": _string},
            {
                "title": _string,
                "description": _string,
                "mimeType": _string,
                "size": _integer(-(2**63)),
                "annotations": _ANNOTATIONS,
            },
        ),
        "resource": _object({"resource": _resource_contents}, {"annotations": _ANNOTATIONS}),
    },
)

_CLIENT_CAPABILITIES = _object(
    {},
    {
        "fs": _object({}, {"readTextFile": _boolean, "writeTextFile": _boolean}),
        "terminal": _boolean,
        "session": _any_object,
        "plan": _any_object,
        "auth": _any_object,
        "elicitation": _any_object,
        "nes": _any_object,
        "positionEncodings": _list(_string),
    },
)
_IMPLEMENTATION = _object({"name": _string, "version": _string}, {"title": _string})
_SESSION_SETUP: dict[str, Shape] = {"cwd": _string, "mcpServers": _list(_any_object)}
_DIRECTORIES: dict[str, Shape] = {"additionalDirectories": _list(_string)}
_U16_MAX = 65535
_U16 = _integer(0, _U16_MAX)

SHAPES: Mapping[str, Shape] = {
    "initialize": _object(
        {"protocolVersion": _U16},
        {"clientCapabilities": _CLIENT_CAPABILITIES, "clientInfo": _IMPLEMENTATION},
    ),
    "authenticate": _object({"methodId": _string}),
    "session/new": _object(_SESSION_SETUP, _DIRECTORIES),
    "session/load": _object({"sessionId": _string, **_SESSION_SETUP}, _DIRECTORIES),
    "session/list": _object({}, {"cwd": _string, "cursor": _string}),
    "session/prompt": _object({"sessionId": _string, "prompt": _list(CONTENT_BLOCK)}),
    "session/cancel": _object({"sessionId": _string}),
    "session/resume": _object(
        {"sessionId": _string, "cwd": _string},
        {"mcpServers": _list(_any_object), **_DIRECTORIES},
    ),
    "session/close": _object({"sessionId": _string}),
    # Steering and queueing (D530): the proposal's method, then our extension methods for
    # clients that do not know it (no `mode`: the method says which).
    "session/inject": _object(
        {"sessionId": _string, "prompt": _list(CONTENT_BLOCK), "mode": _one_of("queue", "steer")}
    ),
    "_trio-agents/steer": _object({"sessionId": _string, "prompt": _list(CONTENT_BLOCK)}),
    "_trio-agents/queue": _object({"sessionId": _string, "prompt": _list(CONTENT_BLOCK)}),
    "session/delete": _object({"sessionId": _string}),
}


_V2_CLIENT_CAPABILITIES = _object(
    {}, {"auth": _any_object, "elicitation": _any_object, "nes": _any_object}
)
_MCP_SERVERS: dict[str, Shape] = {"mcpServers": _list(_any_object)}

V2_SHAPES: Mapping[str, Shape] = {
    **SHAPES,
    # v2's initialize names the client `info` and its capabilities `capabilities`.
    "initialize": _object(
        {"protocolVersion": _U16},
        {"info": _IMPLEMENTATION, "capabilities": _V2_CLIENT_CAPABILITIES},
    ),
    # mcpServers is optional in v2 (an absent list is no server).
    "session/new": _object({"cwd": _string}, {**_MCP_SERVERS, **_DIRECTORIES}),
    "session/resume": _object(
        {"sessionId": _string, "cwd": _string},
        {**_MCP_SERVERS, **_DIRECTORIES, "replayFrom": _object({"type": _one_of("start")})},
    ),
}
"""The shapes on a connection that speaks v2 (D526)."""


def check(method: str, params: Mapping[str, Any], version: int = 1) -> None:
    """Raise JsonRpcError (-32602, naming the field) if `params` do not match `method`'s
    shape in protocol `version` (for `initialize`, the version it asks for); return if they
    do, or if `method` has no shape here."""
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if isinstance(asked, int) and not isinstance(asked, bool) else 1
    shape = (V2_SHAPES if version >= 2 else SHAPES).get(method)
    if shape is not None:
        shape(params, "")
