"""The events of one prompt's turn, as `Agent.stream` hands them out. Pure; no trio import.

Every event but `TurnText` is a translation of one durable record of the turn (`tool/call`,
`tool/result`, `step/end`, `turn/end`), so a stream is a reading of the session, not a
second copy of it. `TurnText` is the one live event: the text a step streams before the
step records it whole in its `assistant/message`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from .._store._records import (
    STEP_END,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    Record,
    TurnEndReason,
    decode_turn_end,
)

__all__ = [
    "TurnDropped",
    "TurnEnd",
    "TurnEvent",
    "TurnStepEnd",
    "TurnText",
    "TurnToolCall",
    "TurnToolResult",
    "end_reason",
    "record_event",
]


@dataclass(frozen=True, slots=True)
class TurnText:
    """Assistant text of the turn, in order: joined, it is the step's `assistant/message`.

    step: the step's number within the turn.
    text: the text, never empty. Pieces a slow reader has not taken yet come as one.
    """

    step: int
    text: str


@dataclass(frozen=True, slots=True)
class TurnToolCall:
    """The model asked for a tool call: its `tool/call` is recorded (and committed before
    the tool starts). Every call gets exactly one `TurnToolResult` later in the turn.

    step: the step's number within the turn.
    call_id: the call's id, as recorded.
    name: the tool's name.
    arguments: the call's arguments (read-only).
    """

    step: int
    call_id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class TurnToolResult:
    """A tool call was answered: its `tool/result` is recorded.

    step: the step's number within the turn.
    call_id: the id of the call it answers.
    name: the tool's name.
    content: the result text given to the model.
    is_error: whether it is an error result (a failing tool, a rejection, an interruption).
    """

    step: int
    call_id: str
    name: str
    content: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class TurnStepEnd:
    """A step ended: its `step/end` is recorded.

    step: the step's number within the turn.
    """

    step: int


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """The turn ended: its `turn/end` is recorded. The last event of a stream.

    turn: the turn's number.
    reason: the `turn/end` reason, e.g. `{"kind": "completed"}` or, for a cancel,
        `{"kind": "aborted", "reason": ..., "cause": "user"}`.
    """

    turn: int
    reason: TurnEndReason


@dataclass(frozen=True, slots=True)
class TurnDropped:
    """The prompt was dropped before its turn started: a cancel or a close cleared the queue
    it waited in. The last (and only) event of such a stream.

    prompt_id: the prompt's message id.
    reason: `"cancelled"` or `"closed"`.
    """

    prompt_id: str
    reason: str


TurnEvent = TurnText | TurnToolCall | TurnToolResult | TurnStepEnd | TurnEnd | TurnDropped
"""Every event a `TurnStream` yields."""


def end_reason(data: Mapping[str, Any]) -> TurnEndReason:
    """The reason of a `turn/end` record's data, typed; a kind this version does not know (a
    newer writer's) is passed on as recorded."""
    recorded = data.get("reason")
    empty: Mapping[str, Any] = {}
    reason = cast("Mapping[str, Any]", recorded) if isinstance(recorded, Mapping) else empty
    decoded = decode_turn_end(reason)
    return decoded if decoded is not None else cast("TurnEndReason", reason)


def record_event(record: Record, step: int, names: Mapping[str, str]) -> TurnEvent | None:
    """The event `record` (of a turn, inside step `step`) stands for, or None for a record
    a stream does not show. `names` maps the turn's call ids to their tools."""
    data = record.data
    if record.type == TOOL_CALL:
        return TurnToolCall(step, str(data["call_id"]), str(data["name"]), data["arguments"])
    if record.type == TOOL_RESULT:
        call_id = str(data["call_id"])
        return TurnToolResult(
            step, call_id, names.get(call_id, ""), str(data["content"]), bool(data["is_error"])
        )
    if record.type == STEP_END:
        return TurnStepEnd(int(data["step"]))
    if record.type == TURN_END:
        return TurnEnd(int(data["turn"]), end_reason(data))
    return None
