"""Close a turn that a crash left open (rule L6). Pure; no trio import.

Given a session's durable records, `closers(records)` returns the records that close its last
turn if it is still open: an `interrupted` result for each tool call without one, `step/end`
for an open step, and `turn/end {interrupted}`. A closed history needs no closers.

`pending_prompts(records)` returns the prompts that were queued (`prompt/queued`) and never
started (no `user/message` with their id) nor dropped (`prompt/dropped`), in queue order: what
a resumed agent restores, parked (rule L8).
"""

from __future__ import annotations

from collections.abc import Sequence

from .._errors import CorruptSessionError
from .._store._records import (
    PROMPT_DROPPED,
    PROMPT_QUEUED,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Record,
    interrupted,
)

__all__ = ["closers", "pending_prompts", "validate"]


def closers(records: Sequence[Record]) -> list[Record]:
    turn: int | None = None
    step: int | None = None
    open_calls: dict[str, str] = {}
    for record in records:
        if record.type == TURN_START:
            turn, step = int(record.data["turn"]), None
            open_calls.clear()
        elif record.type == TURN_END:
            turn, step = None, None
        elif record.type == STEP_START:
            step = int(record.data["step"])
        elif record.type == STEP_END:
            step = None
            open_calls.clear()
        elif record.type == TOOL_CALL:
            open_calls[str(record.data["call_id"])] = str(record.data["name"])
        elif record.type == TOOL_RESULT:
            open_calls.pop(str(record.data["call_id"]), None)
    if turn is None:
        return []
    out = [
        Record.of(
            TOOL_RESULT,
            {
                "call_id": call_id,
                # The call was durable before the tool started (rule L7), so it may have
                # had its effect: say so, or a model would simply run it again.
                "content": (
                    f"tool call {name!r} was interrupted: the process stopped while it ran; "
                    "it may have taken effect, in part or in full"
                ),
                "is_error": True,
                "interrupted": True,
            },
        )
        for call_id, name in open_calls.items()
    ]
    if step is not None:
        out.append(Record.of(STEP_END, {"turn": turn, "step": step}))
    out.append(Record.of(TURN_END, {"turn": turn, "reason": interrupted()}))
    return out


def pending_prompts(records: Sequence[Record]) -> list[tuple[str, str]]:
    """(id, content) of every queued prompt that neither started nor was dropped, oldest
    first. Records of other types, and ids this replay never saw queued, are ignored."""
    pending: dict[str, str] = {}
    for record in records:
        if record.type == PROMPT_QUEUED:
            pending[str(record.data["id"])] = str(record.data["content"])
        elif record.type == USER_MESSAGE:
            pending.pop(str(record.data.get("id", "")), None)
        elif record.type == PROMPT_DROPPED:
            for dropped in record.data.get("ids", ()):
                pending.pop(str(dropped), None)
    return list(pending.items())


def validate(session_id: str, seqs: Sequence[int]) -> None:
    """Stored records must be numbered 0, 1, 2, ... with no gap: anything else is corruption,
    which must stay loud rather than be repaired."""
    for expected, seq in enumerate(seqs):
        if seq != expected:
            raise CorruptSessionError(
                f"session {session_id!r} is corrupt: record {expected} is missing "
                f"(found seq {seq}); restore the store file from a backup",
                session_id=session_id,
                seq=expected,
            )
