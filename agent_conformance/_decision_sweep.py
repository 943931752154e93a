"""Every answer an approver can give, once each, on agents of the target's factory apart from
the machine's (A14-A17): the machine's own agent meets the answers as its random program
draws them, and a rare one (a `cancel` decision) may not come up in a run at all.

For each answer, a new agent that asks before every call (`ApprovalPolicy()`) runs one
prompt whose model asks for the gate tool, then answers; the approver gives the answer and
the records must say what the contract says of it:

- allowed (`allow_once`, `allow_always`): one `tool/approval` record with the decision `by`
  the approver, committed before the tool runs; the call runs and the turn completes;
- rejected (`reject_once`, `reject_always`, or an approver that raises: `reject_once` by
  `approver`): one record, a `tool/result` with `is_error` and `rejected`, the tool never
  runs, and the turn goes on to complete;
- `cancel`: one record, then the turn ends `aborted` with reason `approval cancelled` and
  cause `user`, the call's result `interrupted`;
- an "always" answer holds for the tool's next call in the session: a second prompt's call
  is decided without asking, recorded with the same decision `by: "remembered"`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import trio
import trio.testing

from trio_agents import (
    AgentOptions,
    Approval,
    ApprovalPolicy,
    Decision,
    DecisionOutcome,
    EventBus,
    Record,
    ToolCall,
)
from trio_agents.testing import GateTool, ScriptedModel, reply, tool_step

from ._agent_harness import describe_end
from ._agent_properties import (
    ALWAYS_REMEMBERED,
    APPROVAL_BEFORE_RUN,
    CANCEL_DECISION_ABORTS,
    ONE_APPROVAL_RECORD,
    REJECTED_CALL_ANSWERED,
)
from ._approval_probe import last_turn_end
from ._approver import HeldApprover
from ._properties import Property
from ._vocabulary import TOOL_APPROVAL, TOOL_RESULT

__all__ = ["SWEPT", "sweep_decisions"]

# What the approver answers, and the (decision, by) each must be recorded as.
SWEPT: tuple[tuple[str, tuple[str, str]], ...] = (
    ("allow_once", ("allow_once", "sweep")),
    ("allow_always", ("allow_always", "sweep")),
    ("reject_once", ("reject_once", "sweep")),
    ("reject_always", ("reject_always", "sweep")),
    ("cancel", ("cancel", "sweep")),
    ("fail", ("reject_once", "approver")),
)
CANCELLED = {"kind": "aborted", "reason": "approval cancelled", "cause": "user"}


def _of(records: Sequence[Record], kind: str, call_id: str) -> list[dict[str, Any]]:
    return [dict(r.data) for r in records if r.type == kind and r.data.get("call_id") == call_id]


async def sweep_decisions(factory: Callable[..., Any]) -> int:
    """Run the sweep on agents of `factory` (`factory(model, tools, bus, options,
    approval=...)`); fails the property of the first answer whose records are wrong.
    Returns how many answers were checked (an agent that never asked is skipped: the
    machine's own program judges that)."""
    checked = 0
    for answer, want in SWEPT:
        checked += await _one(factory, answer, want)
    return checked


async def _one(factory: Callable[..., Any], answer: str, want: tuple[str, str]) -> int:
    gate = GateTool()
    calls = ("sweep-1", "sweep-2")
    model = ScriptedModel(
        [
            tool_step(_call(calls[0], gate.name)),
            reply("first done"),
            tool_step(_call(calls[1], gate.name)),
            reply("second done"),
        ]
    )
    approver = HeldApprover()
    approval = Approval(ApprovalPolicy(), approver)
    told = f"an agent asking before every call, whose approver answered {answer!r}"
    async with factory(model, [gate], EventBus(), AgentOptions(), approval=approval) as agent:

        def records() -> Sequence[Record]:
            return tuple(agent.session.records)

        agent.send("call the gate")
        await trio.testing.wait_all_tasks_blocked()
        if list(approver.pending) != [calls[0]]:
            return 0
        decision: object = (
            RuntimeError("the sweep's approver failed on purpose")
            if answer == "fail"
            else Decision(cast("DecisionOutcome", answer), by="sweep")
        )
        approver.answer(decision, calls[0])
        await _settle(agent, gate, approver)
        _check_first(records(), calls[0], answer, want, told, ran=len(gate.calls))
        if answer not in ("allow_always", "reject_always"):
            return 1
        agent.send("call the gate again")
        await trio.testing.wait_all_tasks_blocked()
        asked = list(approver.pending)
        await _settle(agent, gate, approver)
        got = [(a.get("decision"), a.get("by")) for a in _of(records(), TOOL_APPROVAL, calls[1])]
        ALWAYS_REMEMBERED.check(
            not asked and got == [(answer, "remembered")],
            lambda: (
                f"{told} for the tool, its next call in the session "
                f"{'asked the approver again' if asked else 'was not asked about'} and is "
                f"recorded {got or 'without a tool/approval'} (as (decision, by)), not "
                f"{[(answer, 'remembered')]}"
            ),
        )
    return 1


async def _settle(agent: Any, gate: GateTool, approver: HeldApprover) -> None:
    """Let the turn run to its end: a held tool call returns, and a call asked about when
    it should not have been (which the caller has noted) is rejected."""
    for _ in range(4):
        await trio.testing.wait_all_tasks_blocked()
        for call_id in list(approver.pending):
            approver.answer(Decision("reject_once", by="sweep"), call_id)
        while gate.held:
            gate.release("gate output")
    await agent.wait_idle()


def _call(call_id: str, tool: str) -> ToolCall:
    return ToolCall(call_id, tool, {})


def _check_first(
    records: Sequence[Record],
    call_id: str,
    answer: str,
    want: tuple[str, str],
    told: str,
    *,
    ran: int,
) -> None:
    approvals = [(a.get("decision"), a.get("by")) for a in _of(records, TOOL_APPROVAL, call_id)]
    results = _of(records, TOOL_RESULT, call_id)
    end = last_turn_end(records)
    prop: Property = CANCEL_DECISION_ABORTS if answer == "cancel" else ONE_APPROVAL_RECORD
    prop.check(
        approvals == [want],
        lambda: (
            f"{told}: the call's tool/approval records are {approvals or 'none'} (as "
            f"(decision, by)), not {[want]}"
        ),
    )
    if answer == "cancel":
        CANCEL_DECISION_ABORTS.check(
            dict(end or {}) == CANCELLED and ran == 0,
            lambda: (
                f"{told}: the turn ended {describe_end(end)} and the tool ran {ran} time(s); "
                f"it should end {describe_end(CANCELLED)}, the tool never run"
            ),
        )
        CANCEL_DECISION_ABORTS.check(
            all(r.get("interrupted") for r in results),
            lambda: f"{told}: the call's result is {results}, not interrupted",
        )
    elif want[0].startswith("reject"):
        APPROVAL_BEFORE_RUN.check(
            ran == 0, lambda: f"{told}: the tool ran {ran} time(s); a rejected call never runs"
        )
        REJECTED_CALL_ANSWERED.check(
            len(results) == 1
            and results[0].get("is_error") is True
            and results[0].get("rejected") is True,
            lambda: (
                f"{told}: the call's results are {results}; a rejected call gets one error "
                "result with `rejected: true`"
            ),
        )
