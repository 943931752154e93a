"""The agent machine's checks: what it compares after every step (with `AgentReference`,
with its own log of what it released, and with what its listeners saw) and what a close
must leave. `AgentMachine` runs the rules; this base class holds the state they log and
every property check, each raising a `ContractViolation` in the contract's words."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, ClassVar

from trio_agents import (
    AgentClosedError,
    AgentStatus,
    CancelRequested,
    Event,
    Record,
    StatusChanged,
    StepStarted,
    ToolStarted,
    TurnStarted,
)
from trio_agents.testing import GateTool

from ._agent_checks import Reply, records_problem, request_problem
from ._agent_harness import LISTENER_FAILURE, MachineModel, describe_end, is_neighbours, open_turn
from ._agent_properties import (
    CANCEL_EFFECTIVE,
    CANCEL_ORDER,
    CANCEL_REQUESTED,
    CANCELLED_PROMPT_NEVER_RUNS,
    CLOSED_REFUSES,
    CONTEXT_NEXT_STEP,
    DELIVERED_ONCE,
    HISTORY_VALID,
    IDLE_CANCEL_INERT,
    IDLE_CANCEL_STRANDS_NOTHING,
    LISTENER_ERRORS_CONTAINED,
    NO_MODEL_CALL_AFTER_CANCEL,
    ONE_EVENT_ORDER,
    ONE_SEND_ONE_TURN,
    REQUEST_HISTORY,
    REQUEST_UNCHANGED,
    SEND_AFTER_CANCEL_RUNS,
    STATUS_AT_REST,
    STATUS_EVENTS,
    STEERING_DELIVERED,
    STEERING_NEVER_LOST,
    TOOL_CALLS_RUN,
    TURN_END_REASON,
    WAIT_IDLE_CLOSED,
    WAIT_IDLE_RETURNS,
)
from ._agent_tracing import NAMES, MachineTrace
from ._features import Features, features_of
from ._history import history_problems
from ._machine import ConformanceMachine
from ._properties import Property
from ._reference import AgentReference, StepSummary, TurnSummary
from ._targets import AgentFactory
from ._trace_checks import trace_problem
from ._vocabulary import MESSAGE_RECORD_TYPES, STEP_START, TURN_END, TURN_START, USER_MESSAGE

__all__ = ["AgentChecks", "summarize_turns"]


def summarize_turns(records: Sequence[Record]) -> list[TurnSummary]:
    """The reference's view of real records: per turn its prompt, what each step claimed,
    and how it ended."""
    turns: list[TurnSummary] = []
    claimed: list[str] = []
    for record in records:
        if record.type == TURN_START:
            turns.append(TurnSummary(int(record.data["turn"]), prompt=""))
        elif record.type == USER_MESSAGE and turns:
            turns[-1].prompt = str(record.data["id"])
        elif record.type in MESSAGE_RECORD_TYPES:
            claimed.append(str(record.data["id"]))
        elif record.type == STEP_START and turns:
            turns[-1].steps.append(StepSummary(claimed))
            claimed = []
        elif record.type == TURN_END and turns:
            turns[-1].end = {str(k): str(v) for k, v in record.data["reason"].items()}
    return turns


class AgentChecks(ConformanceMachine):
    """The checks of `AgentMachine`, over the state its rules log (see there)."""

    factory: ClassVar[AgentFactory]
    features: ClassVar[Features | None] = None
    """What the agent under test has and which designs it chose; None: what its factory's
    `conformance_features` attribute declares (everything, without one)."""

    model: MachineModel
    gate: GateTool
    events: list[Event]
    witnesses: list[tuple[int, list[Event]]]
    waiters: list[bool]
    ref: AgentReference
    agent: Any
    contents: dict[str, str]
    roles: dict[str, str]
    replies: list[Reply]
    outputs: dict[str, str]
    _observed: list[tuple[Property, str]]
    _observed_late: list[tuple[Property, str]]
    _cancel_views: list[tuple[frozenset[str] | None, str]]
    _rule_cancelling: bool
    _closed_waits: list[str | None]
    _requests_checked: int

    @functools.cached_property
    def has(self) -> Features:
        """The features the agent is checked on: `features`, else its factory's."""
        declared = type(self).features
        return declared if declared is not None else features_of(type(self).factory)

    def _refused(self, verb: str) -> bool:
        """On a CLOSED agent: `verb` must raise AgentClosedError (A10). Whether closed."""
        if self.ref.status != "closed":
            return False
        op = getattr(self.agent, verb)

        def attempt() -> BaseException | None:
            try:
                op(f"{verb} after close")
            except Exception as exc:
                return exc
            return None

        raised = self.host.run_sync(attempt)
        CLOSED_REFUSES.check(
            isinstance(raised, AgentClosedError),  # a trio.ClosedResourceError by its class
            lambda: (
                f"{verb}() on the CLOSED agent "
                + ("returned" if raised is None else f"raised {type(raised).__name__}: {raised}")
            ),
        )
        return True

    def _ref_pending(self) -> frozenset[str]:
        return frozenset([*self.ref.queue, *(mid for mid, _ in self.ref.step_input)])

    def _check_cancel(
        self, effective: bool, expected: bool, before: tuple[frozenset[str], str], call: str
    ) -> None:
        views = list(self._cancel_views)
        self._cancel_views.clear()
        if not expected:
            IDLE_CANCEL_INERT.check(
                effective is False and not views,
                lambda: (
                    f"{call} on an IDLE agent with nothing queued returned {effective} and "
                    f"emitted {len(views)} CancelRequested"
                ),
            )
            return
        CANCEL_EFFECTIVE.check(
            effective is True,
            lambda: (
                f"{call} returned {effective} while the agent was {self._describe_before(before)}"
            ),
        )
        CANCEL_REQUESTED.check(
            len(views) == 1,
            lambda: (
                f"{call} was effective but delivered {len(views)} CancelRequested to its "
                "listeners while it ran"
            ),
        )
        pending, status = views[0]
        want_pending, want_status = before
        if (pending is not None and pending != want_pending) or status != want_status:
            # Reported after the messages' fates: a cancel that lost them is worse news.
            self._observed_late.append(
                (
                    CANCEL_ORDER,
                    f"a listener of CancelRequested saw pending={_ids(pending)} and status "
                    f"{status}; before {call} the agent held {_ids(want_pending)} and was "
                    f"{want_status}",
                )
            )

    def _check_not_stranded(self, mid: str) -> None:
        # A listener's error that broke the turn is that rule's failure, not the cancel's.
        self._check_listener_errors(self.records)
        actual = summarize_turns(self.records)
        IDLE_CANCEL_STRANDS_NOTHING.check(
            actual == self.ref.turns and self.agent.status.value == self.ref.status,
            lambda: (
                f"after a cancel() that had nothing to cancel, the prompt {mid}'s turn "
                f"{_turn_of(actual, mid)} and the agent is {self.agent.status.value}; without the "
                f"cancel its turn {_turn_of(self.ref.turns, mid)}"
            ),
        )

    def _check_sent_runs(self, mid: str) -> None:
        """A send right after an effective cancel is a turn that runs (A7)."""
        fate = self.ref.fate[mid]
        if fate == "discarded":
            return  # a listener's cancel, as the step ended, dropped it: that is allowed
        recorded = any(r.type == USER_MESSAGE and str(r.data["id"]) == mid for r in self.records)
        pending = self._pending()
        SEND_AFTER_CANCEL_RUNS.check(
            recorded if fate == "delivered" else (pending is None or mid in pending),
            lambda: (
                f"{mid}, sent right after an effective cancel, is "
                + ("neither recorded as a turn's prompt nor pending" if not recorded else "lost")
            ),
        )

    def _closed_too_soon(self, who: str, index: int | None = None) -> None:
        """A waiter returned: on a CLOSED agent, the loop must have exited by then (A9)."""
        if self.agent.status is not AgentStatus.CLOSED:
            return
        turn = open_turn(self.records)
        if turn is not None:
            problem = f"{who} returned while turn {turn} had not recorded its turn/end yet"
            if index is None:
                self._observed.append((WAIT_IDLE_CLOSED, problem))
            else:
                self._closed_waits[index] = problem

    def _check_closed(self) -> None:
        """What a close must leave: CLOSED, every waiter of the close returned once the loop
        had exited (A9), and every later send, steer, inject and cancel refused (A10)."""
        self._verify()
        for seen in self._closed_waits:
            if seen == "parked":
                WAIT_IDLE_CLOSED.fail(
                    "a wait_idle() started at StatusChanged(CLOSED) has not returned after "
                    "the loop exited"
                )
            if seen is not None:
                WAIT_IDLE_CLOSED.fail(seen)
        for verb in ("send", "steer", "inject"):
            if verb == "send" or getattr(self.has, verb):
                self._refused(verb)
        result = self.host.run_sync(lambda: self.agent.cancel("after close", cause="user"))
        CLOSED_REFUSES.check(result is False, f"cancel() on the CLOSED agent returned {result}")

    def _sync_replies(self) -> None:
        while len(self.replies) < len(self.model.requests):
            self.replies.append(Reply())

    def _observe(self, event: Event) -> None:
        """The first listener: the state each event finds. It never raises (the agent would
        contain it): what it finds wrong is raised by the next check."""
        agent = self.agent
        if agent is None or is_neighbours(event):
            return
        if isinstance(event, StatusChanged) and agent.status is not event.status:
            self._observed.append(
                (
                    STATUS_EVENTS,
                    f"a listener of StatusChanged({event.status.value}) found the agent "
                    f"{agent.status.value}",
                )
            )
        elif isinstance(event, CancelRequested) and self._rule_cancelling:
            pending = self._pending()
            self._cancel_views.append(
                (None if pending is None else frozenset(pending), agent.status.value)
            )
        elif isinstance(event, TurnStarted | StepStarted):
            # Emitted by the loop, never from inside another delivery: what the listener
            # finds is the state the event announces.
            name = f"{type(event).__name__}(turn {event.turn})"
            if agent.status is not AgentStatus.RUNNING:
                self._observed.append(
                    (STATUS_AT_REST, f"a listener of {name} found the agent {agent.status.value}")
                )
            pending = self._pending()
            if pending:
                delivered = {
                    str(r.data["id"]) for r in self.records if r.type in MESSAGE_RECORD_TYPES
                }
                both = sorted(delivered.intersection(pending))
                if both:
                    self._observed.append(
                        (
                            DELIVERED_ONCE,
                            f"a listener of {name} found {both} recorded and still pending",
                        )
                    )

    def _raise_observed(self) -> None:
        if self._observed:
            prop, happened = self._observed[0]
            prop.fail(happened)

    @property
    def records(self) -> Sequence[Record]:
        """The agent's session records."""
        records: Sequence[Record] = self.agent.session.records
        return records

    def _ready(self) -> bool:
        return self.agent is not None

    def _pending(self) -> list[str] | None:
        """What the agent holds, or None when it has (or declares) no `pending`."""
        if not self.has.pending:
            return None
        pending = getattr(self.agent, "pending", None)
        if pending is None:
            type(self).stats["without pending"] = 1
            return None
        return [str(mid) for mid, _ in pending]

    def _turn_starts(self) -> int:
        return sum(1 for r in self.records if r.type == TURN_START)

    def _verify(self) -> None:
        """Everything the reference determines, after every rule."""
        self._raise_observed()
        records = self.records
        self._check_listener_errors(records)
        HISTORY_VALID.check(
            not (problems := history_problems(records)),
            lambda: f"the history is invalid: {'; '.join(problems)}",
        )
        self._check_approvals(records)
        self._check_fates(records)
        if self._observed_late:
            prop, happened = self._observed_late[0]
            prop.fail(happened)
        self._compare_turns(records)
        status = self.agent.status
        STATUS_AT_REST.check(
            status.value == self.ref.status,
            lambda: f"at rest the agent is {status.value}; it should be {self._describe()}",
        )
        self._check_events()
        requests = len(self.model.requests)
        NO_MODEL_CALL_AFTER_CANCEL.check(
            requests == self.ref.requests,
            lambda: (
                f"the model was called {requests} times; the steps so far call it "
                f"{self.ref.requests} times"
            ),
        )
        NO_MODEL_CALL_AFTER_CANCEL.check(
            self.model.held == int(self.ref.phase == "model"),
            lambda: (
                f"{self.model.held} model call(s) are under way; the agent should be "
                f"{self._describe()}"
            ),
        )
        TOOL_CALLS_RUN.check(
            self.gate.held == int(self.ref.phase == "tool"),
            lambda: (
                f"{self.gate.held} tool call(s) are running; the agent should be {self._describe()}"
            ),
        )
        self._sync_replies()
        problem = records_problem(
            records,
            self.replies,
            self.model.record_counts,
            [context.call_id for _, context in self.gate.calls],
            self.outputs,
            self.contents,
        )
        if problem is not None:
            problem[0].fail(problem[1])
        self._check_trace(records)
        self._check_requests(records)
        parked = self.waiters.count(False)
        WAIT_IDLE_RETURNS.check(
            parked == self.ref.waiting,
            lambda: (
                f"{parked} background wait_idle() calls are still parked, "
                f"{self.ref.waiting} should be, as the agent should be {self._describe()}"
            ),
        )

    def _check_trace(self, records: Sequence[Record]) -> None:
        """The spans of every turn that has ended, against its records (O1, O2)."""
        trace: MachineTrace | None = getattr(self, "trace", None)
        if trace is None:
            return
        started = {e.call_id for e in self.events if isinstance(e, ToolStarted)}
        problem = trace_problem(records, trace.spans(), started, NAMES)
        if problem is not None:
            problem[0].fail(problem[1])

    def _check_approvals(self, records: Sequence[Record]) -> None:
        """The approval window's checks (A14-A18); `ApprovalWindow` has them."""

    def _check_listener_errors(self, records: Sequence[Record]) -> None:
        for record in records:
            if record.type == TURN_END and LISTENER_FAILURE in str(record.data["reason"]):
                LISTENER_ERRORS_CONTAINED.fail(
                    f"turn {record.data['turn']} ended {describe_end(record.data['reason'])}: a "
                    "listener's error broke it"
                )

    def _check_events(self) -> None:
        for start, seen in self.witnesses:
            first = self.events[start:]
            if seen != first:
                ONE_EVENT_ORDER.fail(
                    f"the machine's first listener saw {_kinds(first)}; a listener "
                    f"connected later, after one that calls back into the agent, saw "
                    f"{_kinds(seen)}"
                )
        statuses = [e.status.value for e in self.events if isinstance(e, StatusChanged)]
        STATUS_EVENTS.check(
            statuses == self.ref.status_trace,
            lambda: (
                f"StatusChanged announced {statuses}; the status went through "
                f"{self.ref.status_trace}"
            ),
        )
        cancels = [(e.cause, e.reason) for e in self.events if isinstance(e, CancelRequested)]
        CANCEL_REQUESTED.check(
            cancels == self.ref.cancels,
            lambda: (
                f"CancelRequested (cause, reason) events {cancels}; the effective cancels "
                f"were {self.ref.cancels}"
            ),
        )

    def _check_fates(self, records: Sequence[Record]) -> None:
        seen: dict[str, int] = {}
        for record in records:
            if record.type in MESSAGE_RECORD_TYPES:
                mid = str(record.data["id"])
                seen[mid] = seen.get(mid, 0) + 1
        twice = [mid for mid, count in seen.items() if count > 1]
        DELIVERED_ONCE.check(not twice, lambda: f"the records deliver {twice} more than once")
        pending = self._pending()
        # A lost message is named before a late one: losing one is often why another waits
        # (context held for a turn that never starts because its steering was dropped).
        for mid, fate in self.ref.fate.items():
            if (
                fate != "discarded"
                and mid not in seen
                and pending is not None
                and mid not in pending
            ):
                kind = self.ref.kind[mid]
                _LOST[kind].fail(
                    f"{mid} (a {kind} message) is neither recorded nor pending: it was lost"
                )
        for mid, fate in self.ref.fate.items():
            kind = self.ref.kind[mid]
            recorded = mid in seen
            waiting = pending is not None and mid in pending
            what = f"{mid} (a {kind} message)"
            if fate == "discarded":
                if recorded:
                    CANCELLED_PROMPT_NEVER_RUNS.fail(
                        f"{what} was dropped by a cancel or a close, but it is recorded"
                    )
                if waiting:
                    CANCEL_EFFECTIVE.fail(
                        f"{what} is still pending after the cancel that dropped it"
                    )
            elif fate == "delivered" and not recorded:
                _LATE[kind].fail(f"{what} should have been delivered by now, but is still pending")
            elif fate == "pending" and recorded:
                _LATE[kind].fail(f"{what} is recorded, but the agent should still hold it pending")

    def _compare_turns(self, records: Sequence[Record]) -> None:
        actual = summarize_turns(records)
        expected = self.ref.turns
        prompts = [t.prompt for t in actual]
        ONE_SEND_ONE_TURN.check(
            prompts == [t.prompt for t in expected],
            lambda: (
                f"the turns' prompts are {prompts}; the prompts sent make the turns "
                f"{[t.prompt for t in expected]}"
            ),
        )
        for got, want in zip(actual, expected, strict=True):
            if got.end != want.end:
                TURN_END_REASON.fail(
                    f"turn {got.number} (prompt {got.prompt}) ended "
                    f"{describe_end(got.end)}; it should have ended {describe_end(want.end)}"
                )
            claims = [s.claimed for s in got.steps]
            wanted = [s.claimed for s in want.steps]
            if claims == wanted:
                continue
            differ = {m for a, b in zip(claims, wanted, strict=False) for m in {*a} ^ {*b}}
            prop = NO_MODEL_CALL_AFTER_CANCEL
            if any(self.ref.kind.get(m) == "steering" for m in differ):
                prop = STEERING_DELIVERED
            elif differ:
                prop = CONTEXT_NEXT_STEP
            prop.fail(
                f"turn {got.number} (prompt {got.prompt}) ran {len(claims)} step(s) taking "
                f"{claims} before each; it should have run {len(wanted)} taking {wanted}"
            )

    def _check_requests(self, records: Sequence[Record]) -> None:
        requests = self.model.requests
        # Every request the model kept, not only the new ones: what was sent must stay as
        # it was sent however many records came since (A19).
        for index, (request, sent) in enumerate(zip(requests, self.model.sent, strict=False)):
            if tuple(request.messages) != sent:
                problem = request_problem(
                    records[: self.model.record_counts[index]],
                    request.messages,
                    self.contents,
                    self.roles,
                )
                REQUEST_UNCHANGED.fail(
                    f"model request {index + 1} changed after it was sent: it held "
                    f"{len(sent)} messages and now holds {len(request.messages)}"
                    + (f"; against the history of its step {problem}" if problem else "")
                )
        for index in range(self._requests_checked, len(requests)):
            at = self.model.record_counts[index]
            problem = request_problem(
                records[:at], requests[index].messages, self.contents, self.roles
            )
            if problem is not None:
                REQUEST_HISTORY.fail(f"model request {index + 1}: {problem}")
        self._requests_checked = len(requests)

    def _describe(self) -> str:
        """The reference's state in the contract's words."""
        ref = self.ref
        if ref.status == "closed":
            return "CLOSED"
        queued = f", with {ref.queue} queued" if ref.queue else ""
        turn = ref.turn
        if turn is None:
            return f"{ref.status.upper()}{queued}"
        where = {"model": "waiting for its model call", "tool": "running its tool call"}.get(
            str(ref.phase), "between steps"
        )
        return f"RUNNING turn {turn.number} (prompt {turn.prompt}), {where}{queued}"

    def _describe_before(self, before: tuple[frozenset[str], str]) -> str:
        pending, status = before
        return f"{status.upper()} holding {_ids(pending)}"


def _ids(ids: frozenset[str] | None) -> str:
    return "(not shown)" if ids is None else str(sorted(ids, key=lambda m: (len(m), m)))


def _turn_of(turns: Sequence[TurnSummary], mid: str) -> str:
    turn = next((t for t in turns if t.prompt == mid), None)
    if turn is None:
        return "never started"
    return f"is turn {turn.number}, {describe_end(turn.end)}"


_LOST = {"prompt": ONE_SEND_ONE_TURN, "steering": STEERING_NEVER_LOST, "context": CONTEXT_NEXT_STEP}
_LATE = {"prompt": ONE_SEND_ONE_TURN, "steering": STEERING_DELIVERED, "context": CONTEXT_NEXT_STEP}


def _kinds(events: Sequence[Event]) -> list[str]:
    return [type(e).__name__ for e in events]
