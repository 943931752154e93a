"""What the durable machine checks of a resumed session (rule L6): the repair of an open turn
(an `interrupted` result for each dangling call, then `turn/end {interrupted}`, first and
durably), nothing appended to one closed cleanly, and a valid history. Pure functions of the
records; the machine calls them with what it saw and what the file holds."""

from __future__ import annotations

from collections.abc import Sequence

from trio_agents import Record

from ._durable_properties import (
    RESUME_AFTER_CLOSE_ADDS_NOTHING,
    RESUME_ANSWERS_DANGLING_CALLS,
    RESUME_ENDS_OPEN_TURN,
    RESUME_REPAIR_DURABLE,
    RESUME_REPAIR_FIRST,
    RESUMED_HISTORY_VALID,
    OpenTurn,
    show,
    shown,
)
from ._history import history_problems
from ._vocabulary import PROMPT_RECORD_TYPES, TOOL_RESULT, TURN_END, TURN_START

__all__ = ["check_repair_durable", "check_resumed"]


def check_resumed(
    sid: str, before: Sequence[Record], records: Sequence[Record], *, clean: bool
) -> None:
    """`records` of `sid` once resumed and sent a prompt, `before` what the file held (its
    runtime closed `clean`ly, or crashed): the repair if a turn was open, nothing if not,
    and a valid history. Raises ContractViolation."""
    opened = OpenTurn(before)
    # The prompt queue's records stand outside turns (rule L8): a prompt sent to an
    # agent that restored parked prompts is queued behind them before any turn starts.
    added = [r for r in records[len(before) :] if r.type not in PROMPT_RECORD_TYPES]
    if opened.turn is None:
        RESUME_AFTER_CLOSE_ADDS_NOTHING.check(
            bool(added) and added[0].type == TURN_START,
            lambda: (
                f"{sid!r} was stored with its last turn ended "
                f"({'closed cleanly' if clean else 'then the runtime crashed'}); resuming it "
                f"and sending appended {show(added)}"
            ),
        )
    else:
        _check_repair(sid, opened, added)
    problems = history_problems(records, allow_open_turn=True)
    RESUMED_HISTORY_VALID.check(
        not problems, lambda: f"resumed session {sid!r}: {'; '.join(problems)}"
    )


def _check_repair(sid: str, opened: OpenTurn, added: Sequence[Record]) -> None:
    """What resuming appended (`added`) to a session stored with `opened` turn: its end as
    `interrupted`, a result for each dangling call, and the repair before the new turn."""
    turn = opened.turn
    where = f"{sid!r} was stored with turn {turn} open"
    if opened.dangling:
        where += f" and tool calls {opened.dangling} without a result"
    ends = [
        r
        for r in added
        if r.type == TURN_END
        and r.data.get("turn") == turn
        and dict(r.data.get("reason", {})).get("kind") == "interrupted"
    ]
    RESUME_ENDS_OPEN_TURN.check(
        bool(ends),
        lambda: (
            f"{where}; resuming it and sending appended {show(added)}, with no "
            f"turn/end {turn} interrupted"
        ),
    )
    answered = {
        str(r.data.get("call_id"))
        for r in added
        if r.type == TOOL_RESULT and r.data.get("interrupted") is True
    }
    missing = [c for c in opened.dangling if c not in answered]
    RESUME_ANSWERS_DANGLING_CALLS.check(
        not missing,
        lambda: (
            f"{where}; resuming it appended {show(added)}, with no interrupted result for {missing}"
        ),
    )
    expected = [*opened.repair_types, TURN_START]
    head = list(added[: len(expected)])
    results = {str(r.data.get("call_id")) for r in head if r.type == TOOL_RESULT}
    RESUME_REPAIR_FIRST.check(
        [r.type for r in head] == expected and results == set(opened.dangling),
        lambda: (
            f"{where}; resuming it and sending appended {show(added)}; the "
            f"contract's order is {expected}"
        ),
    )


def check_repair_durable(
    sid: str,
    before: Sequence[Record],
    records: Sequence[Record],
    found: Sequence[Record] | str | None,
) -> None:
    """The repair of `sid` is in the file (`found`, as the machine read it) before the new
    turn's records."""
    repaired = tuple(records[: len(before) + len(OpenTurn(before).repair_types)])
    RESUME_REPAIR_DURABLE.check(
        isinstance(found, tuple) and found[: len(repaired)] == repaired,
        lambda: (
            f"resumed {sid!r} holds {show(repaired)} up to its new turn; the file "
            f"holds {shown(found)}"
        ),
    )
