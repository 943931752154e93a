"""Bad input to the ACP server, generated with Hypothesis (issue 6, acceptance 4): invalid
JSON, wrong types, unknown methods, missing params, huge lines, responses to nothing. Every
request gets a JSON-RPC error (a broken notification is ignored), the server goes on
serving, and no session loses data."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .support.acp_peer import acp_peer

MAX_LINE = 16384  # deep-nesting frames (5,000 levels) still fit
METHODS = ["initialize", "session/new", "session/load", "session/prompt", "authenticate"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _line(value: Any) -> bytes:
    return json.dumps(value).encode() + b"\n"


@st.composite
def bad_frames(draw: st.DrawFn, number: int) -> tuple[bytes, str]:
    """One bad frame and what it should get: "error" (answered with its id), "null" (an
    error with id null), or "nothing"."""
    rid = f"bad-{number}"
    kind = draw(
        st.sampled_from(
            [
                "not-json",
                "not-object",
                "no-jsonrpc",
                "unknown-method",
                "bad-params",
                "params-not-object",
                "huge",
                "response",
                "bad-notification",
                "null-id",
                "deep",
                "surrogate",
                "not-strict-json",
                "no-id-method-not-string",
                "not-a-request-object",
            ]
        )
    )
    if kind == "not-json":
        junk = draw(st.binary(max_size=40).filter(lambda b: b"\n" not in b and b.strip()))
        try:
            json.loads(junk)
        except ValueError:
            return junk + b"\n", "null"
        return b"{" + junk + b"\n", "null"
    if kind == "not-object":
        value = draw(st.lists(json_values, max_size=3) | st.integers() | st.text(max_size=5))
        return _line(value), "null"
    if kind == "no-jsonrpc":
        return _line({"id": rid, "method": "initialize", "params": {}}), "error"
    if kind == "unknown-method":
        method = draw(st.text(min_size=1, max_size=12).filter(lambda m: m not in METHODS))
        return _line({"jsonrpc": "2.0", "id": rid, "method": method, "params": {}}), "error"
    if kind == "bad-params":
        method = draw(st.sampled_from(["session/new", "session/load", "session/prompt"]))
        params = draw(st.dictionaries(st.sampled_from(["sessionId", "cwd", "prompt"]), json_values))
        if method == "session/new" and isinstance(params.get("cwd"), str):
            params["cwd"] = "relative"  # never a valid absolute path
        if method == "session/prompt":
            params["sessionId"] = draw(json_values.filter(lambda v: v != "SID"))
        return _line({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}), "error"
    if kind == "params-not-object":
        not_object: Any = draw(st.one_of(st.lists(json_values, max_size=2), st.integers()))
        frame = {"jsonrpc": "2.0", "id": rid, "method": "session/prompt", "params": not_object}
        return _line(frame), "error"
    if kind == "deep":
        depth = draw(st.integers(3_000, 6_000))  # past the parser's recursion limit
        head = b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"x":' + b"[" * depth
        return head + b"]" * depth + b"}}\n", "null"
    if kind == "surrogate":
        # Valid JSON (an escaped lone surrogate), but not encodable as UTF-8.
        method = draw(st.sampled_from(["initialize", "session/prompt", "nope"]))
        return (
            b'{"jsonrpc":"2.0","id":"'
            + rid.encode()
            + b'","method":"'
            + method.encode()
            + b'","params":{"protocolVersion":1,"sessionId":"\\ud800","x":"\\udc00"}}\n'
        ), "error" if method != "initialize" else "ok"
    if kind == "not-strict-json":
        # Python's parser reads these; JSON has no such values, so the line is not JSON.
        constant = draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity"]))
        return b'{"jsonrpc":"2.0","id":"' + rid.encode() + b'","method":"initialize",' + (
            b'"params":{"protocolVersion":' + constant + b"}}\n"
        ), "null"
    if kind == "no-id-method-not-string":
        # JSON-RPC 2.0's own example: not a notification either, so answered with id null.
        not_method: Any = draw(st.integers() | st.none() | st.lists(st.integers(), max_size=2))
        return _line({"jsonrpc": "2.0", "method": not_method, "params": "bar"}), "null"
    if kind == "not-a-request-object":
        # No "jsonrpc": not a notification, whatever it holds (JSON-RPC 2.0's `{"foo": "boo"}`).
        frame = draw(st.dictionaries(st.sampled_from(["foo", "method", "params"]), json_values))
        return _line(frame), "null"
    if kind == "null-id":
        return _line({"jsonrpc": "2.0", "id": None, "method": "initialize", "params": {}}), "null"
    if kind == "huge":
        return b'{"jsonrpc":"2.0","id":"x","method":"' + b"a" * (MAX_LINE * 2) + b'"}\n', "null"
    if kind == "response":
        return _line({"jsonrpc": "2.0", "id": 10_000 + number, "result": {}}), "nothing"
    cancel: Any = draw(
        st.one_of(
            st.dictionaries(st.text(max_size=5), json_values, max_size=5), st.just({"sessionId": 5})
        )
    )
    return _line({"jsonrpc": "2.0", "method": "session/cancel", "params": cancel}), "nothing"


async def scenario(drawn: list[tuple[bytes, str]]) -> None:
    # Whatever it holds, a line over the limit is refused as a whole (an error, id null).
    frames = [(data, "null" if len(data) > MAX_LINE else why) for data, why in drawn]
    async with acp_peer(max_line=MAX_LINE) as peer:
        sid = (await peer.result("session/new", {"cwd": "/tmp", "mcpServers": []}))["sessionId"]
        prompt = [{"type": "text", "text": "before"}]
        assert (await peer.result("session/prompt", {"sessionId": sid, "prompt": prompt})) == {
            "stopReason": "end_turn"
        }
        for data, _ in frames:
            await peer.send_raw(data)
        # The next valid request is served.
        assert (await peer.result("initialize", {"protocolVersion": 1}))["protocolVersion"] == 1
        prompt = [{"type": "text", "text": "after"}]
        after = await peer.result("session/prompt", {"sessionId": sid, "prompt": prompt})
        assert after == {"stopReason": "end_turn"}
        answers = {f.get("id"): f for f in peer.frames if "method" not in f}
        for number, (_, expected) in enumerate(frames):
            rid = f"bad-{number}"
            if expected == "error":
                assert rid in answers, f"frame {number} was not answered"
                assert "error" in answers[rid]
            elif expected == "ok":
                assert "result" in answers[rid], answers[rid]
        nulls = [f for f in peer.frames if "method" not in f and f.get("id") is None]
        assert all("error" in f for f in nulls)
        assert len(nulls) == sum(1 for _, expected in frames if expected == "null")
        agent = peer.runtime.agents.get(sid)
        assert agent is not None
        users = [r.data["content"] for r in agent.session.records if r.type == "user/message"]
        assert users == ["before", "after"]  # no session lost data


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(st.data())
def test_bad_input_gets_errors_and_the_server_keeps_serving(data: st.DataObject) -> None:
    count = data.draw(st.integers(1, 6), label="frames")
    frames = [data.draw(bad_frames(n), label=f"frame {n}") for n in range(count)]
    trio.run(scenario, frames, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_ids_and_paths_no_file_system_or_database_can_take_are_invalid_params() -> None:
    # JSON strings may hold NUL and lone surrogates. As a cwd they once made a session that
    # every link then crashed the server in; as a session id, an internal error with a
    # traceback from the database's bind (D381).
    async with acp_peer() as peer:
        calls: list[tuple[str, dict[str, Any]]]
        for cwd in ["/tmp/a\x00b", "/tmp/\ud800"]:
            calls = [
                ("session/new", {"mcpServers": []}),
                ("session/list", {}),
                ("session/load", {"sessionId": "s", "mcpServers": []}),
            ]
            for method, extra in calls:
                answer = await peer.request(method, {"cwd": cwd, **extra})
                assert answer["error"]["code"] == -32602, (method, answer)
                assert "cwd" in answer["error"]["message"], answer
        for sid in ["\ud800", "a\udcffb"]:
            calls = [
                ("session/load", {"cwd": "/tmp", "mcpServers": []}),
                ("session/prompt", {"prompt": [{"type": "text", "text": "x"}]}),
                ("session/set_mode", {"modeId": "auto"}),
            ]
            for method, extra in calls:
                answer = await peer.request(method, {"sessionId": sid, **extra})
                assert answer["error"]["code"] == -32602, (method, answer)
                assert "sessionId" in answer["error"]["message"], answer
        # And the server still serves.
        assert (await peer.result("session/new", {"cwd": "/tmp", "mcpServers": []}))["sessionId"]
