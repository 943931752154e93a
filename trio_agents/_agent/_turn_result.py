"""What a finished turn came to, read from its records. Pure; no trio import.

`turn_result` is a function of a session's records and nothing else, so it answers the same
for a live agent, a session loaded from a store, or records read back from a file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import TurnNotFoundError
from .._model._seam import Usage
from .._store._records import (
    ASSISTANT_MESSAGE,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Record,
    TurnEndReason,
)
from ._turn_events import end_reason

__all__ = ["ToolCallResult", "TurnResult", "find_turn", "turn_result"]


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    """One tool call of a turn and how it was answered.

    step: the step's number within the turn.
    call_id: the call's id, as recorded.
    name: the tool's name.
    arguments: the call's arguments (read-only).
    content: the result text given to the model.
    is_error: whether it is an error result.
    interrupted: whether a cancel, a step abort or a close stopped it before it finished.
    rejected: whether the approval gate refused it (it never ran).
    """

    step: int
    call_id: str
    name: str
    arguments: Mapping[str, Any]
    content: str
    is_error: bool
    interrupted: bool
    rejected: bool


@dataclass(frozen=True, slots=True)
class TurnResult:
    """A finished turn, as its records tell it.

    turn: the turn's number.
    prompt_id: the message id of the prompt the turn answered (what `send` returned).
    prompt: the prompt's text.
    text: the text of the turn's last assistant message, "" if it has none (an interrupted
        reply counts: what the model had said when it was stopped).
    tool_calls: every tool call of the turn with its result, in the order recorded.
    end: the reason of its `turn/end` record.
    steps: how many steps (model calls) the turn began.
    usage: tokens summed over the steps whose reply reported usage; None if none did. A
        step stopped before its reply finished reports none.
    """

    turn: int
    prompt_id: str
    prompt: str
    text: str
    tool_calls: tuple[ToolCallResult, ...]
    end: TurnEndReason
    steps: int
    usage: Usage | None


def find_turn(records: Sequence[Record], turn: int | str) -> tuple[int, int | None] | None:
    """Where turn `turn` (a number, or the id of the prompt it answered) is in `records`:
    the index of its `turn/start` and of its `turn/end` (None while it runs), or None if
    `records` hold no such turn. A turn's `user/message` follows its `turn/start`."""
    start: int | None = None
    number = -1
    for index, record in enumerate(records):
        if start is None:
            if record.type != TURN_START:
                continue
            matches = (
                record.data["turn"] == turn
                if isinstance(turn, int)
                else index + 1 < len(records)
                and records[index + 1].type == USER_MESSAGE
                and records[index + 1].data["id"] == turn
            )
            if matches:
                start, number = index, int(record.data["turn"])
        elif record.type == TURN_END and record.data["turn"] == number:
            return start, index
    return None if start is None else (start, None)


def turn_result(records: Sequence[Record], turn: int | str) -> TurnResult:
    """The result of turn `turn` (its number, or the id `send` returned for its prompt) in
    `records`, a session's records (`session.records`). Never blocks.

    Raises TurnNotFoundError if `records` hold no such turn, or the turn has not ended in
    them (it is still running, or the records stop before its end).
    """
    found = find_turn(records, turn)
    if found is None:
        raise TurnNotFoundError(
            f"no turn {turn!r} in these {len(records)} records; pass a turn number or the "
            "message id send() returned for a prompt whose turn has started"
        )
    start, end = found
    if end is None:
        raise TurnNotFoundError(
            f"turn {turn!r} has not ended in these records; wait for it (`await "
            "agent.wait_idle()` or `await stream.result()`) before asking for its result"
        )
    return _result(records[start : end + 1])


def _result(records: Sequence[Record]) -> TurnResult:
    prompt = records[1].data
    text = ""
    steps = 0
    step = 0
    calls: dict[str, tuple[int, str, Mapping[str, Any]]] = {}
    answers: dict[str, Mapping[str, Any]] = {}
    input_tokens = output_tokens = 0
    reported = False
    for record in records:
        data = record.data
        if record.type == STEP_START:
            steps += 1
            step = int(data["step"])
        elif record.type == ASSISTANT_MESSAGE:
            text = str(data["content"])
            usage = data.get("usage")
            if isinstance(usage, Mapping):
                reported = True
                input_tokens += int(usage.get("input_tokens", 0))  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
                output_tokens += int(usage.get("output_tokens", 0))  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
        elif record.type == TOOL_CALL:
            calls[str(data["call_id"])] = (step, str(data["name"]), data["arguments"])
        elif record.type == TOOL_RESULT:
            answers[str(data["call_id"])] = data
    # A recorded `turn/end` comes after a result for every call of its turn (the agent's
    # `finally`, or the closers written on resume), so no call is left out here.
    tool_calls = tuple(
        ToolCallResult(
            at,
            call_id,
            name,
            arguments,
            str(answer["content"]),
            bool(answer["is_error"]),
            bool(answer.get("interrupted", False)),
            bool(answer.get("rejected", False)),
        )
        for call_id, (at, name, arguments) in calls.items()
        if (answer := answers.get(call_id)) is not None
    )
    return TurnResult(
        turn=int(records[0].data["turn"]),
        prompt_id=str(prompt["id"]),
        prompt=str(prompt["content"]),
        text=text,
        tool_calls=tool_calls,
        end=end_reason(records[-1].data),
        steps=steps,
        usage=Usage(input_tokens, output_tokens) if reported else None,
    )
