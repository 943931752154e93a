"""The pure ACP cores: JSON-RPC framing and the record -> ACP mapping, with `acp.schema` as
the oracle for every message shape."""

from __future__ import annotations

from typing import Any

import pytest
from acp import schema
from hypothesis import given
from hypothesis import strategies as st

from trio_agents import Record
from trio_agents.acp import _jsonrpc as rpc
from trio_agents.acp import _prompt
from trio_agents.acp._mapping import (
    initialize_result,
    stop_reason,
    updates_for_record,
)


def test_a_huge_line_is_reported_once_and_skipped_even_across_chunks() -> None:
    splitter = rpc.LineSplitter(max_line=10)
    out: list[bytes | None] = []
    for chunk in (b'{"a":1}\n' + b"x" * 8, b"y" * 8, b"z" * 8 + b"\n", b"ok\n"):
        out += list(splitter.feed(chunk))
    assert out == [b'{"a":1}', None, b"ok"]


@given(st.lists(st.binary(max_size=30).filter(lambda b: b"\n" not in b), max_size=6), st.data())
def test_lines_survive_any_chunking(lines: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=5)))
    splitter = rpc.LineSplitter(max_line=1000)
    got: list[bytes | None] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got += list(splitter.feed(stream[start:end]))
    assert got == lines


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"m","params":{}}', rpc.Request(1, "m", {})),
        (b'{"jsonrpc":"2.0","method":"n"}', rpc.Notification("n", {})),
        (b'{"jsonrpc":"2.0","id":"a","result":5}', rpc.Response("a", 5, None)),
        (b"nope", rpc.Invalid(None, rpc.PARSE_ERROR, "", True)),
        (b"[1]", rpc.Invalid(None, rpc.INVALID_REQUEST, "", True)),
        (b'{"id":3,"method":"m"}', rpc.Invalid(3, rpc.INVALID_REQUEST, "", True)),
        (
            b'{"jsonrpc":"2.0","id":true,"method":"m"}',
            rpc.Invalid(None, rpc.INVALID_REQUEST, "", True),
        ),
        (
            b'{"jsonrpc":"2.0","id":4,"method":"m","params":[]}',
            rpc.Invalid(4, rpc.INVALID_PARAMS, "", True),
        ),
        (
            b'{"jsonrpc":"2.0","method":"m","params":3}',
            rpc.Invalid(None, rpc.INVALID_PARAMS, "", False),
        ),
    ],
)
def test_parse(line: bytes, expected: Any) -> None:
    message = rpc.parse(line)
    if isinstance(expected, rpc.Invalid):
        assert isinstance(message, rpc.Invalid)
        assert (message.id, message.code, message.answer) == (
            expected.id,
            expected.code,
            expected.answer,
        )
        assert message.detail
    else:
        assert message == expected


def test_initialize_result_is_a_valid_initialize_response() -> None:
    schema.InitializeResponse.model_validate(initialize_result("1.0"))


RECORDS = [
    Record.of("turn/start", {"turn": 1}),
    Record.of("user/message", {"id": "m1", "content": "hi"}),
    Record.of("assistant/message", {"content": "let me look", "finish": "tool_calls"}),
    Record.of("tool/call", {"call_id": "c1", "name": "bash", "arguments": {"command": "ls"}}),
    Record.of("tool/result", {"call_id": "c1", "content": "a\nb", "is_error": False}),
    Record.of("tool/call", {"call_id": "c2", "name": "weird", "arguments": {"x": [1, 2]}}),
    Record.of("tool/result", {"call_id": "c2", "content": "no", "is_error": True}),
    Record.of("context/message", {"id": "m2", "content": "notice"}),
    Record.of("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
]


@pytest.mark.parametrize("replay", [False, True])
def test_every_update_validates_against_the_schema(replay: bool) -> None:
    updates = [u for record in RECORDS for u in updates_for_record(record, replay=replay)]
    for update in updates:
        schema.SessionNotification.model_validate({"sessionId": "s", "update": update})
    kinds = [u["sessionUpdate"] for u in updates]
    live = ["tool_call", "tool_call_update", "tool_call", "tool_call_update"]
    assert kinds == (["user_message_chunk", "agent_message_chunk", *live] if replay else live)
    assert updates[-1]["status"] == "failed"


@pytest.mark.parametrize(
    ("reason", "finish", "cancel", "expected"),
    [
        ({"kind": "completed"}, "stop", False, "end_turn"),
        ({"kind": "completed"}, "length", False, "max_tokens"),
        ({"kind": "max_steps"}, "tool_calls", False, "max_turn_requests"),
        ({"kind": "aborted", "reason": "r", "cause": "user"}, "stop", True, "cancelled"),
        (
            {"kind": "aborted", "reason": "step-timeout", "cause": "timeout"},
            "stop",
            False,
            "end_turn",
        ),
        ({"kind": "closed"}, "stop", False, "cancelled"),
        ({"kind": "completed"}, "stop", True, "cancelled"),
    ],
)
def test_stop_reasons(reason: dict[str, str], finish: str, cancel: bool, expected: str) -> None:
    records = [
        Record.of("turn/start", {"turn": 1}),
        Record.of("user/message", {"id": "m1", "content": "hi"}),
        Record.of("assistant/message", {"content": "", "finish": finish}),
        Record.of("turn/end", {"turn": 1, "reason": reason}),
    ]
    assert stop_reason(records, "m1", cancel_requested=cancel) == expected
    schema.PromptResponse.model_validate({"stopReason": expected})


def test_a_failed_turn_is_an_internal_error_and_a_prompt_that_never_ran_is_cancelled() -> None:
    records = [
        Record.of("turn/start", {"turn": 1}),
        Record.of("user/message", {"id": "m1", "content": "hi"}),
        Record.of("turn/end", {"turn": 1, "reason": {"kind": "error", "message": "boom"}}),
    ]
    outcome = stop_reason(records, "m1", cancel_requested=False)
    assert isinstance(outcome, rpc.JsonRpcError)
    assert outcome.code == rpc.INTERNAL_ERROR
    assert outcome.detail == "turn failed: boom"
    assert stop_reason(records, "m9", cancel_requested=False) == "cancelled"


def test_prompt_blocks_accept_text_links_and_resources_and_refuse_the_rest() -> None:
    link = {"type": "resource_link", "uri": "file:///a", "name": "a"}
    embedded = {"type": "resource", "resource": {"uri": "mem:b", "text": "B"}}
    blob = {"type": "resource", "resource": {"uri": "mem:c", "blob": "AA=="}}
    parts = _prompt.blocks({"prompt": [{"type": "text", "text": "see"}, link, embedded, blob]})
    assert _prompt.has_links(parts)
    text = _prompt.compose(parts, {"file:///a": _prompt.resource_text("file:///a", "A")})
    assert text == (
        'see\n<resource uri="file:///a">\nA\n</resource>\n'
        '\n<resource uri="mem:b">\nB\n</resource>\n'
        '\n<resource uri="mem:c" unread="binary content is not given to the model"/>\n'
    )
    for bad in (
        [],
        [{"type": "image", "data": "", "mimeType": "image/png"}],
        [{"type": "text", "text": " "}],
    ):
        with pytest.raises(rpc.JsonRpcError) as info:
            _prompt.blocks({"prompt": bad})
        assert info.value.code == rpc.INVALID_PARAMS
