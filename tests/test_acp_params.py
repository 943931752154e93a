"""The server's params checks (`trio_agents.acp._params`) held to `acp.schema`, the SDK's
models of the ACP schema: whatever the schema rejects, the server rejects too, naming the
field; what the server accepts, the schema accepts."""

from __future__ import annotations

import copy
import json
from typing import Any, cast

import pydantic
import pytest
from acp import schema
from hypothesis import given
from hypothesis import strategies as st

from trio_agents.acp import _jsonrpc as rpc
from trio_agents.acp import _params

MODELS: dict[str, type[pydantic.BaseModel]] = {
    "initialize": schema.InitializeRequest,
    "authenticate": schema.AuthenticateRequest,
    "session/new": schema.NewSessionRequest,
    "session/load": schema.LoadSessionRequest,
    "session/list": schema.ListSessionsRequest,
    "session/prompt": schema.PromptRequest,
    "session/cancel": schema.CancelNotification,
}

ANNOTATIONS = {"audience": ["user"], "priority": 0.5, "lastModified": "2026-01-01"}
VALID: dict[str, dict[str, Any]] = {
    "initialize": {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": False},
            "terminal": True,
        },
        "clientInfo": {"name": "zed", "version": "1", "title": "Zed"},
    },
    "authenticate": {"methodId": "none"},
    "session/new": {"cwd": "/w", "mcpServers": [], "additionalDirectories": ["/x"]},
    "session/load": {"sessionId": "s", "cwd": "/w", "mcpServers": []},
    "session/list": {"cwd": "/w", "cursor": "c"},
    "session/prompt": {
        "sessionId": "s",
        "prompt": [
            {"type": "text", "text": "hi", "annotations": ANNOTATIONS},
            {
                "type": "resource_link",
                "uri": "file:///w/a",
                "name": "a",
                "title": "A",
                "description": "d",
                "mimeType": "text/plain",
                "size": 3,
            },
            {"type": "resource", "resource": {"uri": "m:b", "text": "B", "mimeType": "text/x"}},
            {"type": "resource", "resource": {"uri": "m:c", "blob": "AA=="}},
            {"type": "image", "data": "AA==", "mimeType": "image/png", "uri": "file:///i"},
            {"type": "audio", "data": "AA==", "mimeType": "audio/wav"},
        ],
    },
    "session/cancel": {"sessionId": "s"},
}

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 70_000)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2)
    ),
    max_leaves=4,
)


def oracle_accepts(method: str, params: Any) -> bool:
    try:
        MODELS[method].model_validate(params)
    except pydantic.ValidationError:
        return False
    return True


def ours(method: str, params: Any) -> rpc.JsonRpcError | None:
    try:
        _params.check(method, params)
    except rpc.JsonRpcError as exc:
        error = exc
    else:
        return None
    assert error.code == rpc.INVALID_PARAMS
    return error


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into `value` (keys and indexes), except into mcpServers' items and _meta,
    which the server checks only as objects (and refuses when present)."""
    found = [prefix] if prefix else []
    if prefix and prefix[-1] in ("mcpServers", "_meta"):
        return found
    if isinstance(value, dict):
        fields = cast("dict[str, Any]", value)
        for key, inner in fields.items():
            found += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        items: list[Any] = value  # pyright: ignore[reportUnknownVariableType]
        for index, inner in enumerate(items):
            found += paths(inner, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, Any, str]:
    method = draw(st.sampled_from(sorted(VALID)))
    params = copy.deepcopy(VALID[method])
    chosen = draw(st.sampled_from(paths(params)))
    parent: Any = params
    for step in chosen[:-1]:
        parent = parent[step]
    last = chosen[-1]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[last]
    else:
        parent[last] = draw(JSON)
    return method, params, str(last)


def test_the_valid_requests_are_valid_for_both() -> None:
    for method, params in VALID.items():
        assert oracle_accepts(method, params), method
        assert ours(method, params) is None, method


@given(mutated())
def test_what_the_schema_rejects_the_server_rejects_naming_the_field(
    case: tuple[str, Any, str],
) -> None:
    method, params, changed = case
    error = ours(method, params)
    if not oracle_accepts(method, params):
        assert error is not None, (method, json.dumps(params))
    if error is not None:
        # The field named is the one changed, or (a tagged union) the tag beside it.
        named = error.detail.split(" must ", 1)[0].split(" is required", 1)[0]
        assert changed in named or named.endswith(".type"), (error.detail, changed)


@pytest.mark.parametrize("version", ["x", "1", 1.0, 1.5, True, None, -1, 65536, [1], {"v": 1}])
def test_a_protocol_version_that_is_not_a_u16_integer_is_refused(version: Any) -> None:
    error = ours("initialize", {"protocolVersion": version})
    assert error is not None
    assert error.detail.startswith("protocolVersion must be an integer from 0 to 65535")
    assert ours("initialize", {}) is not None


def test_messages_name_the_path_to_the_field() -> None:
    bad_block = {"sessionId": "s", "prompt": [{"type": "text", "text": "a"}, {"type": "text"}]}
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("session/prompt", bad_block, "prompt[1].text is required"),
        ("session/prompt", {"sessionId": "s", "prompt": [{"type": "video"}]}, "prompt[0].type "),
        ("session/new", {"cwd": 5, "mcpServers": []}, "cwd must be a string, got 5"),
        ("session/list", {"cursor": 3}, "cursor must be a string, got 3"),
        (
            "initialize",
            {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": "yes"}}},
            "clientCapabilities.fs.readTextFile must be true or false",
        ),
    ]
    for method, params, message in cases:
        error = ours(method, params)
        assert error is not None
        assert error.detail.startswith(message), error.detail
    # A method without a shape here is left to its handler (-32601 for unknown ones).
    assert ours("session/unknown", {"anything": object()}) is None
