"""Structural checks over a session's records, usable as invariants by any test or machine.

`history_problems(records)` returns a list of human-readable violations (empty when the
history is valid), so a failure message can say exactly which record is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

from trio_agents import Record

from ._vocabulary import STEP_END, STEP_START, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START

__all__ = ["history_problems"]


def history_problems(records: Sequence[Record], *, allow_open_turn: bool = True) -> list[str]:
    """Violations of: turns and steps balanced and nested, turn numbers contiguous, every
    `tool/call` answered by exactly one `tool/result` within its step, no result without a
    call. With `allow_open_turn`, the last turn may still be running."""
    problems: list[str] = []
    turn: int | None = None
    step: int | None = None
    last_turn = 0
    open_calls: dict[str, int] = {}
    answered: set[str] = set()
    for index, record in enumerate(records):
        where = f"record {index} ({record.type})"
        data = record.data
        if record.type == TURN_START:
            if turn is not None:
                problems.append(f"{where}: turn {data['turn']} starts inside open turn {turn}")
            if last_turn and data["turn"] != last_turn + 1:
                problems.append(f"{where}: turn {data['turn']} does not follow turn {last_turn}")
            turn = last_turn = int(data["turn"])
        elif record.type == TURN_END:
            if turn is None or data["turn"] != turn:
                problems.append(f"{where}: turn/end {data['turn']} but the open turn is {turn}")
            if step is not None:
                problems.append(f"{where}: turn ends while step {step} is open")
            turn = None
        elif record.type == STEP_START:
            if turn is None or step is not None:
                problems.append(f"{where}: step/start outside a turn or inside step {step}")
            step = int(data["step"])
        elif record.type == STEP_END:
            if step is None or data["step"] != step:
                problems.append(f"{where}: step/end {data['step']} but the open step is {step}")
            for call_id in open_calls:
                problems.append(f"{where}: tool call {call_id!r} has no result in its step")
            open_calls.clear()
            step = None
        elif record.type == TOOL_CALL:
            call_id = str(data["call_id"])
            if step is None:
                problems.append(f"{where}: tool call {call_id!r} outside a step")
            if call_id in open_calls or call_id in answered:
                problems.append(f"{where}: tool call id {call_id!r} used twice")
            open_calls[call_id] = index
        elif record.type == TOOL_RESULT:
            call_id = str(data["call_id"])
            if call_id not in open_calls:
                problems.append(f"{where}: result for {call_id!r}, which is not an open call")
            open_calls.pop(call_id, None)
            answered.add(call_id)
    if not allow_open_turn and turn is not None:
        problems.append(f"turn {turn} never ended")
    if not allow_open_turn and open_calls:
        problems.append(f"tool calls without a result: {sorted(open_calls)}")
    return problems
