"""The agent machine's approval window (A14-A18): an agent that asks before every tool call,
an approver the machine answers (`decide`), and a decision racing a cancel in one scheduler
batch. A cancel, a close, a listener's cancel or time passing while a decision is pending
come from the machine's other rules.

`AgentMachine` runs these with its other rules; its docstring lists the state they use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

import trio
import trio.testing
from hypothesis import strategies as st
from hypothesis.stateful import precondition

from trio_agents import ApprovalPolicy, ApprovalRequest, Decision, Policy, Record, ToolStarted

from ._agent_harness import MachineGate
from ._agent_properties import (
    ALWAYS_REMEMBERED,
    APPROVAL_BEFORE_RUN,
    APPROVAL_WAIT_UNTIMED,
    CANCEL_ENDS_APPROVAL_WAIT,
)
from ._agent_verify import AgentChecks
from ._approval_checks import Expected, approval_problem
from ._approval_probe import LAST_ANSWERS, two_calls_waiting
from ._approver import HeldApprover
from ._machine import rule
from ._reference import POLICY_REJECTS, Outcome, PolicyKind
from ._targets import takes_keyword

__all__ = [
    "APPROVER_FAILURE",
    "POLICY_FAILURE",
    "ApprovalWindow",
    "SwitchedPolicy",
    "policy_for",
    "takes_approval",
]

# What the machine's approver may answer; `fail` makes it raise (the call is rejected).
ANSWERS = ("allow_always", "cancel", "reject_once", "allow_once", "reject_always", "fail")
APPROVER_FAILURE = "the machine's approver failed on purpose"
STEP_TIMEOUT = 100.0  # the agent machine's `step_timeout`, when it is set


POLICY_FAILURE = "the machine's policy failed on purpose"


@dataclass(frozen=True)
class _BrokenPolicy:
    """A policy that raises, or answers a verdict that is none of allow, ask, reject: the
    agent must reject every call it is asked about (fail closed, A14)."""

    how: Literal["raises", "unknown"]
    remembers: bool = True

    def verdict(self, request: ApprovalRequest) -> Any:
        if self.how == "raises":
            raise RuntimeError(POLICY_FAILURE)
        return "maybe"


class SwitchedPolicy:
    """An `ApprovalPolicy` that asks before the machine's tool or rejects it, switched by
    the machine between calls (a user turning a read-only mode on and off): a policy's
    verdict is given call by call, and a rejection holds over an answer the session
    remembers (A14, A17)."""

    remembers = True

    def __init__(self, kind: Literal["ask", "reject"], tool: str) -> None:
        self._tool = tool
        self.switch(kind)

    def switch(self, kind: Literal["ask", "reject"]) -> None:
        self.kind = kind
        rejects = frozenset({self._tool}) if kind == "reject" else frozenset[str]()
        self._inner = ApprovalPolicy(reject=rejects)

    def verdict(self, request: ApprovalRequest) -> Any:
        return self._inner.verdict(request)


def policy_for(kind: PolicyKind, tool: str) -> Policy:
    """The machine's policy of `kind` (see `AgentReference.policy`) for its tool `tool`."""
    if kind == "ask-forgetful":
        return ApprovalPolicy(remembers=False)
    if kind == "raises" or kind == "unknown":
        return _BrokenPolicy(kind)
    return SwitchedPolicy(kind, tool)


def takes_approval(factory: Callable[..., Any]) -> bool:
    """Whether an agent factory takes `approval=` (an Approval) to ask before acting."""
    return takes_keyword(factory, "approval")


class ApprovalWindow(AgentChecks):
    """The approval rules and checks (see `AgentMachine`)."""

    explore_schedules: ClassVar[bool]
    approver: HeldApprover | None
    policy: Policy | None
    expected_approvals: dict[str, Expected]
    _asking: str | None
    _ended_waiting: set[str]
    _probed_two_calls: bool
    clock: trio.testing.MockClock

    if TYPE_CHECKING:  # rules of `AgentMachine`

        def send(self) -> None: ...
        def time_passes(self, seconds: float) -> None: ...
        def _rule_cancel(self, reason: str, cause: Literal["user", "parent"]) -> bool: ...
        def release_model(self, answer: Literal["text", "tool"]) -> None: ...

    def _note_call(self, call_id: str) -> None:
        """The model asked for `call_id`, just released: what the records must show of its
        decision, from the reference's state as it was released."""
        if not self.ref.asks:
            return
        remembered = self.ref.remembered
        if self.ref.policy in POLICY_REJECTS:
            self.expected_approvals[call_id] = ("reject_once", "policy")
        elif remembered is not None:
            decision = "allow_always" if remembered == "allow" else "reject_always"
            self.expected_approvals[call_id] = (decision, "remembered")
        else:
            self.expected_approvals[call_id] = None
            self._asking = call_id

    # -- rules ---------------------------------------------------------------------------

    @precondition(lambda self: _can_ask(self))
    @rule()
    def call_gated_tool(self) -> None:
        """Bring the agent to a call waiting for its decision: send a prompt unless a turn
        runs, then let the model ask for the tool. A random program seldom gets there (it
        needs a send and a tool reply in a row), so it is a rule of its own; the decision is
        left pending, for a cancel, a close or time to land meanwhile."""
        if self.ref.turn is None:
            self.send()
        if self.ref.phase == "model":
            self.release_model("tool")

    @precondition(lambda self: self.ref.phase == "approval" or _can_ask(self))
    @rule(outcome=st.sampled_from(ANSWERS), slowly=st.booleans())
    def decide(self, outcome: str, slowly: bool) -> None:
        """Answer the call waiting for a decision (brought to its wait first, if none
        waits): allow or reject it, once or for the session, cancel the turn, or fail (the
        call is rejected: fail closed). `slowly`: a whole `step_timeout` passes first,
        which the wait must not count (A18)."""
        if not self._at_a_gated_call():
            return
        if slowly and self.has.step_timeout:
            self.time_passes(STEP_TIMEOUT)
            self._check_waiting()
        call_id, approver = self._held_call()
        if outcome == "fail":
            answer: object = RuntimeError(APPROVER_FAILURE)
            self.expected_approvals[call_id] = ("reject_once", "approver")
        else:
            answer = Decision(cast("Outcome", outcome), by="machine")
            self.expected_approvals[call_id] = (outcome, "machine")
        self._asking = None
        self.host.run_sync(approver.answer, answer, call_id)
        self.host.settle()
        # Before the reference moves on: an agent that got the decision wrong is off the
        # reference's path from here, and its records say how.
        self._check_approval_records(self.records)
        self.ref.decide("reject_once" if outcome == "fail" else cast("Outcome", outcome))

    @precondition(
        lambda self: (
            (self.ref.phase == "approval" or _can_ask(self))
            and self.has.same_batch_races
            and self.explore_schedules
        )
    )
    @rule(outcome=st.sampled_from(ANSWERS[:5]), decision_first=st.booleans())
    def race_decision_and_cancel(self, outcome: Outcome, decision_first: bool) -> None:
        """A decision and a cancel from two tasks started in the same scheduler batch (at a
        call brought to its wait first, if none waits): the approver's task runs only after
        both, so the cancel wins either way (A15)."""
        if not self._at_a_gated_call():
            return
        call_id, approver = self._held_call()
        before = (self._ref_pending(), self.ref.status)
        ran: list[bool] = []

        async def answer() -> None:
            approver.answer(Decision(outcome, by="machine"), call_id)

        async def cancel() -> None:
            ran.append(self._rule_cancel("race", "user"))

        async def both() -> None:
            async with trio.open_nursery() as nursery:
                for op in (answer, cancel) if decision_first else (cancel, answer):
                    nursery.start_soon(op)

        # The cancel wins: the decision must leave nothing (checked before the reference
        # moves on, as in `decide`).
        self._ended_waiting.add(call_id)
        self._asking = None
        self.host.call(both)
        self._raise_observed()
        self.host.settle()
        self._check_approval_records(self.records)
        expected = self.ref.cancel("race", "user")
        self._check_cancel(ran[0], expected, before, "cancel() racing a decision")

    @precondition(
        lambda self: (
            self.approver is not None
            and self.has.step_timeout
            and not self._probed_two_calls
            and self.ref.status == "idle"
            and not self._ref_pending()
        )
    )
    @rule()
    def two_calls_wait(self) -> None:
        """A18 with two calls of one step waiting at once, on an agent of the factory apart
        from the machine's (`_approval_probe`), while the machine's agent is idle: the
        step's clock stays stopped until neither waits, then runs on. Once per example."""
        self._probed_two_calls = True
        total: list[float] = []

        def jump(seconds: float) -> None:
            total.append(seconds)
            self.clock.jump(seconds)

        # The last answer varies with the example, without a draw of its own.
        last = LAST_ANSWERS[len(self.records) % len(LAST_ANSWERS)]
        checked = self.host.call(two_calls_waiting, type(self).factory, jump, STEP_TIMEOUT, last)
        self.host.settle()
        self.ref.time_passes(sum(total))
        if not checked:
            type(self).stats["two calls not asked at once"] = 1

    @precondition(
        lambda self: (
            isinstance(self.policy, SwitchedPolicy)
            # Where the switch decides something: an answer remembered, or a rejection
            # to lift.
            and (self.ref.remembered is not None or self.ref.policy == "reject")
            and self.ref.phase != "approval"
            and self.ref.status != "closed"
        )
    )
    @rule()
    def policy_switches(self) -> None:
        """The policy's verdict on the tool switches, ask to reject or back (read-only mode
        turned on or off): from the next call on, a rejecting policy rejects it by
        `policy` even when the session remembers an answer, and an asking one asks unless
        the session remembers one (A14, A17)."""
        policy = cast("SwitchedPolicy", self.policy)
        kind: Literal["ask", "reject"] = "reject" if policy.kind == "ask" else "ask"
        policy.switch(kind)
        self.ref.policy = kind

    def _at_a_gated_call(self) -> bool:
        """Whether a call waits for its decision, after bringing one to its wait if none
        did (False: an armed listener's cancel ended the turn on the way)."""
        if self.ref.phase != "approval":
            self.call_gated_tool()
        return self.ref.phase == "approval"

    # -- checks ----------------------------------------------------------------------------

    def _held_call(self) -> tuple[str, HeldApprover]:
        approver, call_id = self.approver, self._asking
        assert approver is not None, "the agent asks no approver"
        assert call_id is not None, "no call waits for a decision"
        self._check_waiting()
        return call_id, approver

    def _check_approvals(self, records: Sequence[Record]) -> None:
        """A14-A18, after every rule (before the turns are compared: a decision wrongly
        recorded is the news, not the turn it then ends wrongly)."""
        if self.approver is None:
            return
        if self._asking is not None and self.ref.phase != "approval":
            # The wait ended without a decision of the machine: a cancel, a close, a race.
            self._ended_waiting.add(self._asking)
            self._asking = None
        self._check_approval_records(records)
        self._check_waiting()

    def _check_approval_records(self, records: Sequence[Record]) -> None:
        gate = cast("MachineGate", self.gate)
        ran = [
            (context.call_id, at)
            for (_, context), at in zip(gate.calls, gate.record_counts, strict=True)
        ]
        started = [e.call_id for e in self.events if isinstance(e, ToolStarted)]
        problem = approval_problem(
            records, self.expected_approvals, ran, self._ended_waiting, started
        )
        if problem is not None:
            problem[0].fail(problem[1])

    def _check_waiting(self) -> None:
        """The approver holds a request exactly while the reference waits for a decision."""
        approver = self.approver
        assert approver is not None
        pending = approver.pending
        waits = self.ref.phase == "approval"
        if waits and self._asking not in pending:
            if self.ref.clock > self.ref.asked_at:
                APPROVAL_WAIT_UNTIMED.fail(
                    f"call {self._asking!r} waited {self.ref.clock - self.ref.asked_at:g} s for "
                    f"its decision and its step ended meanwhile ({_end(self.records)}); the "
                    f"step has {self._left():g} s of its own time left"
                )
            APPROVAL_BEFORE_RUN.fail(
                f"call {self._asking!r} should wait for its decision, but the approver holds "
                f"{list(pending) or 'no request'}"
            )
        stale = [c for c in pending if c != self._asking or not waits]
        if not stale:
            return
        if any(c in self._ended_waiting for c in stale):
            CANCEL_ENDS_APPROVAL_WAIT.fail(
                f"the approver is still asked about {stale} after a cancel or a close ended "
                "the wait"
            )
        if self.ref.remembered is not None:
            ALWAYS_REMEMBERED.fail(
                f"the approver was asked about {stale}, but the session answered "
                f"{self.ref.remembered!r} always for the tool"
            )
        APPROVAL_BEFORE_RUN.fail(f"the approver is asked about {stale}; no call should wait")

    def _left(self) -> float:
        timeout = self.ref.step_timeout or 0.0
        return self.ref.step_started_at + timeout - self.ref.asked_at


def _end(records: Sequence[Record]) -> str:
    for record in reversed(records):
        if record.type == "turn/end":
            return f"its turn ended {dict(record.data['reason'])}"
    return "its turn is still open"


def _can_ask(machine: ApprovalWindow) -> bool:
    """Whether `call_gated_tool` can bring the agent to a call waiting for its decision."""
    ref = machine.ref
    return ref.asks and ref.status != "closed" and ref.phase in (None, "model")
