"""Known-bad agents of the approval window (A14-A18): each is the real agent with one seeded
defect in how it passes a call through the approval gate. `_FlawedGate` is a copy of the real
gate (`_approval_gate.admit` and `decide`) whose flags each seed one mistake; an agent of
`_Gate` gives it as its gate (`Agent._gate`, a seam)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import ClassVar

import trio

from trio_agents import (
    Agent,
    AgentOptions,
    Approval,
    ApprovalRequest,
    Decision,
    EventBus,
    Model,
    Session,
    Tool,
    ToolStarted,
    open_agent,
)
from trio_agents._agent._approval import approval_record, rejection_text
from trio_agents._agent._approval_gate import Cancel, Gate
from trio_agents._agent._turn import Turn, commit
from trio_agents._util import describe

from ._seeded import Seeded


class _Gate(Agent):
    """The real agent, with the real gate but for one flag flipped by each subclass."""

    __slots__ = ()

    runs_rejected: ClassVar[bool] = False  # a rejected call runs all the same
    cancel_is_failure: ClassVar[bool] = False  # a cancel while asking reads as a failure
    checks_cancel_after_answer: ClassVar[bool] = True
    cancel_decision_rejects: ClassVar[bool] = False
    remembers: ClassVar[bool] = True
    stops_clock: ClassVar[bool] = True
    counts_waiting: ClassVar[bool] = True  # False: each call keeps the deadline itself
    policy_failure_asks: ClassVar[bool] = False
    announces_first: ClassVar[bool] = False  # ToolStarted before the call is decided
    remembered_first: ClassVar[bool] = False  # a remembered answer before the verdict
    restarts_after_failure: ClassVar[bool] = True  # False: a failed approver's wait never ends

    def _gate(self) -> Gate:
        return _FlawedGate(type(self), self.events)


class _FlawedGate:
    """`admit`, `decide` and `_ask` of `_approval_gate`, reading the flags of `flags`."""

    def __init__(self, flags: type[_Gate], events: EventBus) -> None:
        self.flags = flags
        self.events = events

    async def _ask(self, approval: Approval, request: ApprovalRequest, turn: Turn) -> Decision:
        flags = self.flags
        scope, left = turn.step_scope, math.inf
        if flags.stops_clock and flags.counts_waiting:
            turn.stop_step_clock()
        elif flags.stops_clock and scope is not None:
            left = scope.deadline - trio.current_time()
            scope.deadline = math.inf
        failed = False
        try:
            try:
                answer: object = await approval.approver(request)
            except Exception as exc:
                failed = True
                return Decision("reject_once", by="approver", note=f"it failed: {describe(exc)}")
            except trio.Cancelled:
                if not flags.cancel_is_failure:
                    raise
                return Decision("reject_once", by="approver", note="it failed: Cancelled")
        finally:
            if failed and not flags.restarts_after_failure:
                pass  # the seeded defect: the clock stays stopped
            elif flags.stops_clock and flags.counts_waiting:
                turn.restart_step_clock()
            elif flags.stops_clock and scope is not None and not math.isinf(left):
                scope.deadline = trio.current_time() + left
        if not isinstance(answer, Decision):  # pyright: ignore[reportUnnecessaryIsInstance]
            return Decision("reject_once", by="approver", note="not a Decision")
        if flags.checks_cancel_after_answer:
            await trio.lowlevel.checkpoint_if_cancelled()
        return answer

    async def _decide(
        self, approval: Approval, request: ApprovalRequest, turn: Turn
    ) -> Decision | None:
        if self.flags.remembered_first and request.tool in approval.remembered:
            return approval.settled(request, "ask")
        try:
            verdict = approval.policy.verdict(request)
        except Exception as exc:
            if not self.flags.policy_failure_asks:
                return Decision("reject_once", by="policy", note=f"the policy failed: {exc!r}")
            verdict = "ask"
        if verdict == "allow":
            return None
        if verdict not in ("ask", "reject"):
            return Decision("reject_once", by="policy", note=f"the policy answered {verdict!r}")
        decision = approval.settled(request, verdict)
        if decision is None:
            decision = await self._ask(approval, request, turn)
            if self.flags.remembers:
                approval.remember(request, decision)
        return decision

    async def __call__(
        self,
        approval: Approval,
        request: ApprovalRequest,
        turn: Turn,
        *,
        session: Session,
        cancel: Cancel,
    ) -> bool:
        if self.flags.announces_first:
            started = ToolStarted(
                request.agent_id, request.turn, request.step, request.call_id, request.tool
            )
            self.events.emit(started)
        decision = await self._decide(approval, request, turn)
        if decision is None:
            return True
        session.append("tool/approval", approval_record(request, decision))
        if decision.outcome == "cancel" and not self.flags.cancel_decision_rejects:
            cancel("approval cancelled", cause="user")
            await trio.lowlevel.checkpoint()
        if not decision.allows and not self.flags.runs_rejected:
            session.append(
                "tool/result",
                {
                    "call_id": request.call_id,
                    "content": rejection_text(request, decision),
                    "is_error": True,
                    "rejected": True,
                },
            )
            return False
        await commit(session, f"the approval of tool call {request.call_id!r}")
        return True


class AnnouncedBeforeDecided(_Gate):
    """(A14) Announces a gated call as started when it reaches the gate, so a listener sees
    it at once (and again, after an allow, where the step announces it)."""

    __slots__ = ()
    announces_first = True


class RejectedCallRuns(_Gate):
    """(A14) A rejection is recorded, but the call runs anyway."""

    __slots__ = ()
    runs_rejected = True


class ApprovalCancelTakenAsRejection(_Gate):
    """(A15) A cancel while the approver is asked reads as the approver failing: the call
    is recorded rejected (fail closed, it seems) instead of ending the wait unanswered."""

    __slots__ = ()
    cancel_is_failure = True


class LateDecisionRecorded(_Gate):
    """(A15) No look at the turn's cancellation once the approver has answered: a decision
    that arrives in the same scheduler batch as a cancel is recorded (and acted on)."""

    __slots__ = ()
    checks_cancel_after_answer = False


class CancelDecisionRejects(_Gate):
    """(A16) A `cancel` decision only rejects the call; the turn goes on."""

    __slots__ = ()
    cancel_decision_rejects = True


class AlwaysForgotten(_Gate):
    """(A17) "Always" answers are recorded but never remembered: the approver is asked
    again at the tool's next call."""

    __slots__ = ()
    remembers = False


class ApprovalWaitTimed(_Gate):
    """(A18) The step's clock runs on while the approver is asked: a person who takes
    longer than `step_timeout` to answer finds the turn aborted."""

    __slots__ = ()
    stops_clock = False


class ClockRestartedPerCall(_Gate):
    """(A18) Each asked call stops the step's clock and starts it again itself, with no
    count of the calls still waiting: the first of two calls decided restarts the clock
    while the other still waits (and the second, which saw it stopped, never does)."""

    __slots__ = ()
    counts_waiting = False


class PolicyFailureAsks(_Gate):
    """(A14) A policy that raises is taken as having nothing to say: the approver is asked,
    as if the verdict were `ask`, instead of the call being rejected by the policy."""

    __slots__ = ()
    policy_failure_asks = True


class RememberedBeforePolicy(_Gate):
    """(A14, A17) The session's remembered answer is looked up before the policy is: a tool
    allowed "always" runs on after the policy has come to reject it."""

    __slots__ = ()
    remembered_first = True


class ClockLeftStoppedByFailure(_Gate):
    """(A18) The step's clock is started again after the approver's answer, on the path
    that returns one: an approver that raises leaves it stopped, and the calls of the step
    that do run are never timed."""

    __slots__ = ()
    restarts_after_failure = False


def asking_factory(cls: type[Agent]):  # type: ignore[no-untyped-def] # pyright: ignore
    def factory(
        model: Model,
        tools: Sequence[Tool],
        events: EventBus,
        options: AgentOptions,
        approval: Approval | None = None,
    ) -> AbstractAsyncContextManager[Agent]:
        return open_agent(
            model,
            tools=tools,
            events=events,
            options=options,
            session="bad",
            agent_class=cls,
            approval=approval,
        )

    factory.__name__ = cls.__name__
    return factory


rejected_call_runs = asking_factory(RejectedCallRuns)
announced_before_decided = asking_factory(AnnouncedBeforeDecided)
approval_cancel_taken_as_rejection = asking_factory(ApprovalCancelTakenAsRejection)
late_decision_recorded = asking_factory(LateDecisionRecorded)
cancel_decision_rejects = asking_factory(CancelDecisionRejects)
always_forgotten = asking_factory(AlwaysForgotten)
approval_wait_timed = asking_factory(ApprovalWaitTimed)
policy_failure_asks = asking_factory(PolicyFailureAsks)
clock_restarted_per_call = asking_factory(ClockRestartedPerCall)
remembered_before_policy = asking_factory(RememberedBeforePolicy)
clock_left_stopped_by_failure = asking_factory(ClockLeftStoppedByFailure)

SEEDED = (
    Seeded("rejected-call-runs", rejected_call_runs, "agent", "approval-before-run"),
    Seeded("announced-before-decided", announced_before_decided, "agent", "approval-before-run"),
    Seeded(
        "approval-cancel-taken-as-rejection",
        approval_cancel_taken_as_rejection,
        "agent",
        "cancel-ends-approval-wait",
    ),
    Seeded(
        "race-late-decision-recorded",
        late_decision_recorded,
        "agent",
        "cancel-ends-approval-wait",
        # The late decision taken, its call starts: announced with no decision recorded.
        also=("approval-before-run",),
    ),
    Seeded("cancel-decision-rejects", cancel_decision_rejects, "agent", "cancel-decision-aborts"),
    Seeded("always-forgotten", always_forgotten, "agent", "always-remembered"),
    Seeded("approval-wait-timed", approval_wait_timed, "agent", "approval-wait-untimed"),
    Seeded("policy-failure-asks", policy_failure_asks, "agent", "one-approval-record"),
    Seeded("clock-restarted-per-call", clock_restarted_per_call, "agent", "approval-wait-untimed"),
    Seeded(
        "clock-left-stopped-by-failure",
        clock_left_stopped_by_failure,
        "agent",
        "approval-wait-untimed",
    ),
    # The call the policy rejects is recorded as remembered, and run: either shows first.
    Seeded(
        "remembered-before-policy",
        remembered_before_policy,
        "agent",
        "one-approval-record",
        also=("approval-before-run",),
    ),
)
