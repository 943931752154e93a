"""What the agent machine checks of an agent that asks before acting (A14-A17), against the
records: which calls ran, what each decision left, and what a cancel while waiting left.

The machine notes, per call the model asked for, the decision it expects the records to
hold (`Expected`), and which waits ended without a decision; these functions compare that
with the records. A pure module: no trio, no Hypothesis.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from trio_agents import Record

from ._agent_properties import (
    ALWAYS_REMEMBERED,
    APPROVAL_BEFORE_RUN,
    CANCEL_DECISION_ABORTS,
    CANCEL_ENDS_APPROVAL_WAIT,
    ONE_APPROVAL_RECORD,
    REJECTED_CALL_ANSWERED,
)
from ._properties import Property
from ._vocabulary import TOOL_APPROVAL, TOOL_RESULT, TURN_END, TURN_START

__all__ = ["Expected", "approval_problem"]

Problem = tuple[Property, str]
Expected = tuple[str, str] | None
"""A call's expected decision as (decision, by), or None: no decision (yet, or ever)."""

CANCELLED_BY_APPROVAL = {"kind": "aborted", "reason": "approval cancelled", "cause": "user"}


def approval_problem(
    records: Sequence[Record],
    expected: Mapping[str, Expected],
    ran: Sequence[tuple[str, int]],
    ended_waiting: Collection[str],
    started: Collection[str] = (),
) -> Problem | None:
    """The first call whose approval the records get wrong. `expected`: every gated call's
    expected decision; `ran`: (call id, how many records there were when the tool received
    it); `ended_waiting`: the calls whose wait a cancel, a close or a race ended; `started`:
    the calls a `ToolStarted` announced."""
    approvals: dict[str, list[tuple[int, Record]]] = {}
    results: dict[str, list[tuple[int, Record]]] = {}
    for index, record in enumerate(records):
        if record.type == TOOL_APPROVAL:
            approvals.setdefault(str(record.data["call_id"]), []).append((index, record))
        elif record.type == TOOL_RESULT:
            results.setdefault(str(record.data["call_id"]), []).append((index, record))
    for call_id, at in ran:
        if call_id not in expected:
            continue
        before = [dict(r.data) for i, r in approvals.get(call_id, []) if i < at]
        if [a.get("decision") for a in before] not in (["allow_once"], ["allow_always"]):
            return APPROVAL_BEFORE_RUN, (
                f"the tool received call {call_id!r}, but the records before it hold "
                f"{before or 'no tool/approval'} for it"
            )
    for call_id in started:
        want = expected.get(call_id, ("allow_once", "policy"))
        if want is None or want[0] not in ("allow_once", "allow_always"):
            decided = "no decision" if want is None else f"the decision {want[0]!r}"
            return APPROVAL_BEFORE_RUN, (
                f"ToolStarted announced the gated call {call_id!r}, which has {decided}: it is "
                "emitted only once the call is allowed"
            )
    for call_id, want in expected.items():
        recorded = approvals.get(call_id, [])
        answered = results.get(call_id, [])
        if want is None:
            problem = _undecided(call_id, recorded, answered, call_id in ended_waiting)
        else:
            problem = _decided(records, call_id, want, recorded, answered)
        if problem is not None:
            return problem
    return None


def _undecided(
    call_id: str,
    recorded: Sequence[tuple[int, Record]],
    answered: Sequence[tuple[int, Record]],
    ended: bool,
) -> Problem | None:
    if not ended:
        if recorded:
            return ONE_APPROVAL_RECORD, (
                f"call {call_id!r} waits for its decision, but the records already hold "
                f"{[dict(r.data) for _, r in recorded]}"
            )
        return None
    if recorded:
        return CANCEL_ENDS_APPROVAL_WAIT, (
            f"the wait for call {call_id!r}'s decision was ended by a cancel or a close, but "
            f"a decision was recorded after it: {[dict(r.data) for _, r in recorded]}"
        )
    if answered and not answered[0][1].data.get("interrupted"):
        return CANCEL_ENDS_APPROVAL_WAIT, (
            f"the wait for call {call_id!r}'s decision was ended by a cancel or a close, but "
            f"its tool/result is {dict(answered[0][1].data)}, not interrupted"
        )
    return None


def _decided(
    records: Sequence[Record],
    call_id: str,
    want: tuple[str, str],
    recorded: Sequence[tuple[int, Record]],
    answered: Sequence[tuple[int, Record]],
) -> Problem | None:
    decision, by = want
    prop = ONE_APPROVAL_RECORD
    if by == "remembered":
        prop = ALWAYS_REMEMBERED
    elif decision == "cancel":
        prop = CANCEL_DECISION_ABORTS
    got = [(r.data.get("decision"), r.data.get("by")) for _, r in recorded]
    if got != [want]:
        return prop, (
            f"call {call_id!r} was decided {decision} by {by}, but its tool/approval records "
            f"are {got or 'none'} (as (decision, by))"
        )
    if answered and answered[0][0] < recorded[0][0]:
        return prop, f"call {call_id!r} has its tool/result before its tool/approval"
    result = dict(answered[0][1].data) if answered else None
    if decision.startswith("reject"):
        if result is None or not (
            result.get("rejected") is True
            and result.get("is_error") is True
            and not result.get("interrupted")
        ):
            return REJECTED_CALL_ANSWERED, (
                f"call {call_id!r} was rejected, but its tool/result is "
                f"{result or 'missing'}; it should be an error with `rejected: true`"
            )
    elif decision == "cancel":
        if result is not None and not result.get("interrupted"):
            return CANCEL_DECISION_ABORTS, (
                f"call {call_id!r} was decided `cancel`, but its tool/result is {result}, "
                "not interrupted"
            )
        end = _turn_end(records, recorded[0][0])
        if end is not None and end != CANCELLED_BY_APPROVAL:
            return CANCEL_DECISION_ABORTS, (
                f"call {call_id!r} was decided `cancel`, but its turn ended {end}, not "
                f"{CANCELLED_BY_APPROVAL}"
            )
    return None


def _turn_end(records: Sequence[Record], at: int) -> dict[str, object] | None:
    """The reason of the turn that record `at` belongs to, or None while it runs."""
    for record in records[at:]:
        if record.type == TURN_END:
            return dict(record.data["reason"])
        if record.type == TURN_START:
            return None
    return None
