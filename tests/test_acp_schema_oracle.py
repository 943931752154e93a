"""The ACP schema the suite and the tests hold frames to (issue 37, item 7): the newest
published ACP v1 JSON schema, its methods found from the schema itself, and messages that
name the place and what the schema wanted there."""

from __future__ import annotations

from typing import Any

import pytest

from agent_conformance._acp import _schema as schema
from agent_conformance._acp import _wire as wire


def update(**fields: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": fields},
    }


def test_every_method_of_2026_has_its_shapes() -> None:
    for method in ("session/resume", "session/close", "session/delete", "logout", "session/list"):
        assert method in wire.REQUESTS_TO_AGENT
        assert method in wire.RESPONSES
    assert wire.NOTIFICATIONS_TO_AGENT["$/cancel_request"] == "CancelRequestNotification"
    assert wire.NOTIFICATIONS_TO_CLIENT["session/update"] == "SessionNotification"
    assert "elicitation/create" in wire.REQUESTS_TO_CLIENT


def test_what_2026_added_is_valid() -> None:
    chunk = update(
        sessionUpdate="agent_message_chunk",
        content={"type": "text", "text": "hi"},
        messageId="assistant-1-1",
    )
    assert wire.check_from_agent_message(chunk, None) is None
    usage = update(sessionUpdate="usage_update", used=120, size=8000)
    assert wire.check_from_agent_message(usage, None) is None
    answer: dict[str, Any] = {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert wire.check_from_agent_message(answer, "session/delete") is None


@pytest.mark.parametrize(
    ("message", "answers", "said"),
    [
        (
            update(sessionUpdate="tool_call", toolCallId="c", title="t", kind="run"),
            None,
            '$.update.kind: "run" is not one of "read", "edit", "delete", "move", "search"',
        ),
        (
            update(sessionUpdate="agent_message_chunk", content={"type": "text"}),
            None,
            "$.update.content: 'text' is a required property",
        ),
        (
            update(sessionUpdate="usage_update", used=-1, size=10),
            None,
            "$.update.used: -1 is less than the minimum of 0",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "done"}},
            "session/prompt",
            '$.stopReason: "done" is not one of "end_turn", "max_tokens"',
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}},
            None,
            'Error: $.code: "x" matches none of the shapes the schema allows there',
        ),
    ],
)
def test_an_invalid_message_is_named_by_its_place_and_the_schemas_want(
    message: dict[str, Any], answers: str | None, said: str
) -> None:
    problem = wire.check_from_agent_message(message, answers)
    assert problem is not None
    assert said in problem, problem


def test_an_unknown_definition_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="the ACP v1 schema has no definition 'Nope'"):
        schema.problem("Nope", {})


def test_the_v2_schema_has_its_own_methods_and_shapes() -> None:
    v2 = wire.methods(2)
    assert v2.responses["session/prompt"] == "PromptResponse"
    assert "session/load" not in v2.requests_to_agent
    assert "fs/read_text_file" not in v2.requests_to_client
    receipt = {"jsonrpc": "2.0", "id": 1, "result": {"messageId": "m"}}
    assert wire.check_from_agent_message(receipt, "session/prompt", 2) is None
    # A v1 answer (a stop reason, no receipt) is not a v2 prompt's answer.
    v1_answer = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}
    problem = wire.check_from_agent_message(v1_answer, "session/prompt", 2)
    assert problem is not None
    assert "messageId" in problem, problem
    idle = update(sessionUpdate="state_update", state="idle", stopReason="end_turn")
    assert wire.check_from_agent_message(idle, None, 2) is None
    # v2's updates are an open set: the schema takes a kind it does not know (v1's
    # `tool_call` among them); the ACP machine's v2 rule holds kinds to the known ones.
    call = update(sessionUpdate="tool_call", toolCallId="c", title="t")
    assert wire.check_from_agent_message(call, None, 2) is None
