"""A18 with more than one call waiting: an agent of the target's factory, apart from the
machine's, whose model asks for two calls in one step, both asked at once; the step's clock
must stay stopped until neither waits, then run on from where it stopped.

The machine's own agent asks about one call at a time (its reference follows one call per
step), so it never sees a decision arrive while another call still waits; this probe does,
on the machine's clock, while the machine's agent is idle (nothing of it is timed then).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import trio
import trio.testing

from trio_agents import (
    AgentOptions,
    Approval,
    ApprovalPolicy,
    Decision,
    EventBus,
    Record,
    ToolCall,
)
from trio_agents.testing import GateTool, ScriptedModel, reply, tool_step

from ._agent_harness import describe_end
from ._agent_properties import APPROVAL_WAIT_UNTIMED
from ._approver import HeldApprover
from ._vocabulary import TURN_END

__all__ = ["LAST_ANSWERS", "PROBE_CALLS", "LastAnswer", "last_turn_end", "two_calls_waiting"]

PROBE_CALLS = ("probe-call-1", "probe-call-2")


def last_turn_end(records: Sequence[Record]) -> Mapping[str, str] | None:
    for record in reversed(records):
        if record.type == TURN_END:
            reason: Mapping[str, str] = record.data["reason"]
            return reason
    return None


LastAnswer = Literal["allow", "reject", "fail"]
LAST_ANSWERS: tuple[LastAnswer, ...] = ("allow", "reject", "fail")


async def two_calls_waiting(
    factory: Callable[..., Any],
    jump: Callable[[float], None],
    step_timeout: float,
    last: LastAnswer = "allow",
) -> bool:
    """Run the probe on an agent of `factory` (`factory(model, tools, bus, options,
    approval=...)`), moving the run's MockClock with `jump`. The first call is allowed; the
    second is answered as `last` says: allowed, rejected, or by an approver that raises
    (rejected too; either way the first call runs on, and the step's clock with it). Fails
    APPROVAL_WAIT_UNTIMED on a violation; False if the agent did not ask about both calls
    at once (then the probe says nothing of it), True once checked."""
    gate = GateTool()
    model = ScriptedModel(
        [
            tool_step(*(ToolCall(call_id, gate.name, {}) for call_id in PROBE_CALLS)),
            reply("the probe's answer"),
        ]
    )
    approver = HeldApprover()
    approval = Approval(ApprovalPolicy(), approver)
    options = AgentOptions(step_timeout=step_timeout)
    t = step_timeout
    async with factory(model, [gate], EventBus(), options, approval=approval) as agent:

        def records() -> Sequence[Record]:
            return tuple(agent.session.records)

        async def after(seconds: float) -> Mapping[str, str] | None:
            jump(seconds)
            await trio.testing.wait_all_tasks_blocked()
            return last_turn_end(records())

        agent.send("call the gate twice")
        await trio.testing.wait_all_tasks_blocked()
        if set(approver.pending) != set(PROBE_CALLS):
            return False
        first, second = PROBE_CALLS
        end = await after(1.5 * t)
        APPROVAL_WAIT_UNTIMED.check(
            end is None,
            lambda: (
                f"two calls of one step waited {1.5 * t:g} s for their decisions and the turn "
                f"ended meanwhile ({describe_end(end)}); step_timeout is {t:g} s"
            ),
        )
        approver.answer(Decision("allow_once", by="machine"), first)
        await trio.testing.wait_all_tasks_blocked()  # the decision is taken before time moves
        end = await after(1.5 * t)
        APPROVAL_WAIT_UNTIMED.check(
            end is None,
            lambda: (
                f"{first!r} was allowed, {second!r} still waited for its decision "
                f"{1.5 * t:g} s later, and the turn ended meanwhile ({describe_end(end)}); "
                f"the step's clock must stay stopped while any call of it waits "
                f"(step_timeout {t:g} s)"
            ),
        )
        answers: dict[LastAnswer, object] = {
            "allow": Decision("allow_once", by="machine"),
            "reject": Decision("reject_once", by="machine"),
            "fail": RuntimeError("the probe's approver failed on purpose"),
        }
        approver.answer(answers[last], second)
        await trio.testing.wait_all_tasks_blocked()
        said = {"allow": "allowed", "reject": "rejected", "fail": "decided by a failing approver"}
        end = await after(0.5 * t)
        APPROVAL_WAIT_UNTIMED.check(
            end is None,
            lambda: (
                f"{0.5 * t:g} s after the last of two calls was {said[last]} (the first runs), "
                f"the turn ended ({describe_end(end)}); the step had used none of its "
                f"{t:g} s before the wait"
            ),
        )
        end = await after(0.6 * t)
        APPROVAL_WAIT_UNTIMED.check(
            end is not None and end.get("reason") == "step-timeout",
            lambda: (
                f"{1.1 * t:g} s after the last of two calls was {said[last]} (the first "
                "still runs), "
                f"the turn is {describe_end(end)}, not aborted by its step_timeout of "
                f"{t:g} s: the step's clock did not run on once no call waited"
            ),
        )
    return True
