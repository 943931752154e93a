"""The agent state machine: random programs of send, steer, inject, cancel, model and tool
releases and wait_idle, checked after every step against `AgentReference`.

Each example owns one `TrioHost`. After every rule the host settles (every task blocked), and
the agent must then match the reference exactly: status, the turns with their prompt, the
messages claimed before each step and the end reasons, the number of model calls, which gate
is held, and every message's fate; every model request must hold the history recorded before
it, and the records every reply and tool call the machine released. Each check is a named
property of a contract rule (`_agent_properties.py`); the checks live in `_agent_verify.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, Literal, cast

import trio
import trio.testing
from hypothesis import Phase
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, run_state_machine_as_test

from .._agent import Agent
from .._events import (
    CancelRequested,
    Event,
    EventBus,
    StatusChanged,
    StepEnded,
    StepStarted,
    TextStreamed,
    TurnEnded,
    TurnStarted,
)
from .._model import Message, Model, TextDelta, ToolCall
from .._options import AgentOptions
from .._standalone import open_agent
from .._status import AgentStatus
from .._tool import Tool
from ._agent_checks import Reply
from ._agent_harness import (
    LISTENER_FAILURE,
    MachineGate,
    MachineHost,
    MachineModel,
    QuietListenerFailures,
    RandomSeeder,
)
from ._agent_properties import (
    CLOSED_REFUSES,
    HISTORY_VALID,
    INJECT_NEVER_WAKES,
    PROPERTIES,
    STATUS_AFTER_SEND,
    WAIT_IDLE_RETURNS,
)
from ._agent_verify import AgentChecks, summarize_turns
from ._history import history_problems
from ._machine import machine_for, rule
from ._properties import Property
from ._reference import AgentReference
from ._scripted import HOLD, GateTool, ScriptedStep, reply, tool_step
from ._targets import AgentFactory

__all__ = [
    "PROPERTIES",
    "AgentFactory",
    "AgentMachine",
    "RandomSeeder",
    "check_agent_conformance",
    "summarize_turns",
]

STEP_TIMEOUT = 100.0  # trio seconds; time only passes in the `time_passes` rule
# A close ends what a program can explore: it is enabled only once this many steps ran.
CLOSE_AFTER = 12
# The events a raising listener may be armed at (A11).
RAISING_AT: dict[str, type] = {
    "CancelRequested": CancelRequested,
    "StatusChanged": StatusChanged,
    "StepEnded": StepEnded,
    "StepStarted": StepStarted,
    "TextStreamed": TextStreamed,
    "TurnEnded": TurnEnded,
    "TurnStarted": TurnStarted,
}


def _exploring(machine: AgentMachine) -> bool:
    return type(machine).explore_schedules


def agent_settings(settings: Settings) -> Settings:
    """The agent machine's budget from a profile's: without Hypothesis's explain phase,
    which reruns a shrunk failure many times to list the lines only failures ran, a third
    of the cost of a failure, and of no help in reading a named property's violation."""
    return Settings(settings, phases=[p for p in settings.phases if p is not Phase.explain])


def builtin_agent_factory(
    model: Model, tools: Sequence[Tool], events: EventBus, options: AgentOptions
) -> AbstractAsyncContextManager[Agent]:
    return open_agent(model, tools=tools, events=events, options=options)


class AgentMachine(AgentChecks):
    """Subclass and set `factory` to check another implementation.

    What a subclass's rules and checks can use:

    clock: the run's MockClock; trio time only moves in the `time_passes` rule.
    host: the TrioHost the agent runs in.
    model: the agent's ScriptedModel; every call is held until a rule releases it.
    gate: the agent's one tool, a GateTool.
    bus: the EventBus the agent emits on.
    events: every event emitted, in order.
    waiters: one flag per background wait_idle: whether it has returned.
    ref: the AgentReference the agent must match.
    agent: the agent under test (None until `open_agent` has run).
    contents: the content each accepted message was given, by id.
    roles: the role each injected context message was given, by id.
    replies: what each model call was let stream, in call order.
    outputs: what each tool call returned, by call id.
    """

    factory: ClassVar[AgentFactory] = staticmethod(builtin_agent_factory)
    stats: ClassVar[dict[str, int]] = {"examples": 0, "checks": 0}
    """Counts examples and checked steps; give a subclass its own dict to count one run."""
    histories: ClassVar[set[int]] = set()
    """Fingerprints of the distinct histories (record types and status trace) produced."""
    explore_schedules: ClassVar[bool] = True
    """Race operations in one scheduler batch, with the scheduler's seed drawn per example.
    Off, every operation runs alone and only the default schedule is ever seen."""

    def __init__(self) -> None:
        # The clock moves only when a rule says so (`time_passes`): an autojump clock would
        # also leap ahead whenever the agent is at rest, and time steps out at random.
        self.clock = trio.testing.MockClock()
        super().__init__(MachineHost(self.clock))
        self.model: MachineModel = MachineModel()
        self.gate: GateTool = MachineGate()
        self.bus = EventBus()
        self.events: list[Event] = []
        self.bus.connect(self.events.append)
        # Connected first: it sees each event before any armed listener acts on it.
        self.bus.connect(self._observe)
        self.waiters: list[bool] = []  # one flag per background wait_idle: has it returned?
        self.ref = AgentReference()
        self.agent: Any = None
        self.contents: dict[str, str] = {}
        self.roles: dict[str, str] = {}
        self.replies: list[Reply] = []
        self.outputs: dict[str, str] = {}
        self._counter = 0
        self._steps = 0
        self._observed: list[tuple[Property, str]] = []  # what listeners saw go wrong
        self._observed_late: list[tuple[Property, str]] = []  # ... checked after the fates
        self._cancel_views: list[tuple[frozenset[str] | None, str]] = []
        self._rule_cancelling = False  # a rule (not a listener) is inside cancel()
        self._idle_cancelled = False  # the last cancel had nothing to cancel
        self._closed_waits: list[str | None] = []  # per waiter of the close: what it saw
        self._requests_checked = 0
        self._quiet = QuietListenerFailures()
        logging.getLogger("trio_agents.events").addFilter(self._quiet)

    def step_begins(self) -> None:
        """Count the step, then as `ConformanceMachine.step_begins`."""
        self._steps += 1
        super().step_begins()

    # -- setup and teardown -------------------------------------------------------------

    @initialize(
        max_steps=st.one_of(st.none(), st.integers(1, 3)),
        step_timeout=st.sampled_from([None, STEP_TIMEOUT]),
        scheduler=st.random_module(),
    )
    def open_agent(self, max_steps: int | None, step_timeout: float | None, scheduler: Any) -> None:
        """`scheduler` reseeds trio's scheduler randomness (registered with Hypothesis), so
        the order of tasks in a batch is part of the example: explored, shrunk, replayed.
        A printed reproduction passes our `RandomSeeder` to do the same outside Hypothesis."""
        if isinstance(scheduler, RandomSeeder):
            scheduler.apply()
        self.ref = AgentReference(max_steps=max_steps, step_timeout=step_timeout)
        options = AgentOptions(max_steps=max_steps, step_timeout=step_timeout)
        factory = type(self).factory
        self.agent = self._start_service(
            lambda: factory(self.model, [self.gate], self.bus, options)
        )
        self.model.records = lambda: len(self.agent.session.records)
        self.host.settle()

    def _history(self) -> Hashable | None:
        opened: Any = self.agent
        if opened is None:
            return None
        kinds = tuple(record.type for record in opened.session.records)
        return (kinds, tuple(self.ref.status_trace))

    def _check_closing(self) -> None:
        if self.ref.status != "closed":
            self._close(None)
        self._check_closed()
        HISTORY_VALID.check(
            not (problems := history_problems(self.records, allow_open_turn=False)),
            lambda: f"after the close the history is invalid: {'; '.join(problems)}",
        )

    def _after_close(self) -> None:
        logging.getLogger("trio_agents.events").removeFilter(self._quiet)

    # -- rules ---------------------------------------------------------------------------

    @rule()
    def send(self) -> None:
        """Send a prompt; from IDLE the agent is RUNNING when send() returns (A1)."""
        if self._refused("send"):
            return
        mid = self._deliver(self.agent.send, self._content("prompt"), "send")
        self.host.settle()
        self.ref.send(mid)
        if self._idle_cancelled:
            self._idle_cancelled = False
            self._check_not_stranded(mid)

    @rule(count=st.integers(2, 3))
    def send_several(self, count: int) -> None:
        """Send prompts back to back: they queue in the order sent, one turn each (A2)."""
        for _ in range(count):
            self.send()

    @rule()
    def steer(self) -> None:
        """Steer: steering for the running turn, or a prompt without one."""
        if self._refused("steer"):
            return
        mid = self._deliver(self.agent.steer, self._content("steering"), "steer")
        self.host.settle()
        self.ref.steer(mid)

    @rule(role=st.sampled_from(["str", "user", "system"]))
    def inject(self, role: Literal["str", "user", "system"]) -> None:
        """Inject context for the next step, as a str or a Message of role user or system:
        it never wakes the agent (A4)."""
        if self._refused("inject"):
            return
        content = self._content("context")
        message: Message | str = content if role == "str" else Message(role, content)
        idle = self.ref.status == "idle"
        started = self._turn_starts()
        mid, status = self.host.run_sync(
            lambda: (str(self.agent.inject(message)), self.agent.status)
        )
        self.contents[mid] = content
        self.roles[mid] = "system" if role == "system" else "user"
        INJECT_NEVER_WAKES.check(
            not idle or status is AgentStatus.IDLE,
            lambda: f"inject() of {mid} into an IDLE agent returned with the agent {status.value}",
        )
        self.host.settle()
        self.ref.inject(mid)
        INJECT_NEVER_WAKES.check(
            not idle or (self.agent.status is AgentStatus.IDLE and self._turn_starts() == started),
            lambda: (
                f"after inject() of {mid} into an IDLE agent it is {self.agent.status.value} "
                f"with {self._turn_starts() - started} new turn(s)"
            ),
        )

    @rule(cause=st.sampled_from(["user", "parent"]), reason=st.sampled_from(["stop", "enough"]))
    def cancel(self, cause: Literal["user", "parent"], reason: str) -> None:
        """Cancel; `cancel()` must say whether it was effective as the reference does, and
        its CancelRequested listeners must see the agent as it was (A5, A6)."""
        if self.ref.status == "closed":
            result = self.host.run_sync(lambda: self.agent.cancel(reason, cause=cause))
            CLOSED_REFUSES.check(result is False, f"cancel() on the CLOSED agent returned {result}")
            return
        before = (self._ref_pending(), self.ref.status)
        effective = self.host.run_sync(self._rule_cancel, reason, cause)
        self._raise_observed()
        self.host.settle()
        expected = self.ref.cancel(reason, cause)
        self._check_cancel(effective, expected, before, f"cancel({reason!r}, cause={cause!r})")
        self._idle_cancelled = not expected

    @precondition(lambda self: self.ref.phase == "model")
    @rule(answer=st.sampled_from(["text", "tool"]))
    def release_model(self, answer: Literal["text", "tool"]) -> None:
        """Let the held model call answer (the rest of) its reply: text, or a call of the
        gate tool."""
        n = self._next()
        streamed = self._current_reply()
        if answer == "text":
            step = reply(f"answer {n}")
            streamed.text.append(f"answer {n}")
        else:
            step = tool_step(ToolCall(f"call-{n}", self.gate.name, {}))
            streamed.calls.append(f"call-{n}")
        streamed.finished = True
        self.host.run_sync(self.model.release, step)
        self.host.settle()
        self.ref.release_model(answer)

    @precondition(lambda self: self.ref.phase == "model")
    @rule()
    def release_partial(self) -> None:
        """Let the held model call stream a piece of text, then hold the rest: a cancel, a
        timeout or a close now cuts a reply that is under way (A8)."""
        piece = f"part {self._next()} "
        self._current_reply().text.append(piece)
        self.host.run_sync(self.model.release, ScriptedStep((TextDelta(piece), HOLD)))
        self.host.settle()

    @precondition(lambda self: self.ref.phase == "tool")
    @rule()
    def finish_tool(self) -> None:
        """Let the held tool call return."""
        output = f"tool output {self._next()}"
        if self.gate.calls:
            self.outputs[self.gate.calls[-1][1].call_id] = output
        self.host.run_sync(self.gate.release, output)
        self.host.settle()
        self.ref.finish_tool()

    @rule(seconds=st.sampled_from([30.0, 50.0, STEP_TIMEOUT]))
    def time_passes(self, seconds: float) -> None:
        """Trio time moves on (free with the autojump clock): a held step may time out."""
        self.host.run_sync(self.clock.jump, seconds)
        self.host.settle()
        self.ref.time_passes(seconds)

    @precondition(lambda self: self.ref.phase is not None and self._turn_can_end_here())
    @rule()
    def steer_as_the_turn_ends(self) -> None:
        """Steer in the turn's last step, then end that step so the turn ends with the
        steering unconsumed: the step times out, or it is the last `max_steps` allows and
        returns. That steering must become the next prompt, ahead of the queue (A3). A
        random program reaches this window rarely, so it is a rule of its own."""
        self.steer()
        if self.ref.step_timeout is not None:
            self.time_passes(STEP_TIMEOUT)
        elif self.ref.phase == "model":
            self.release_model("text")
        else:
            self.finish_tool()

    def _turn_can_end_here(self) -> bool:
        if self.ref.step_timeout is not None:
            return True
        turn, limit = self.ref.turn, self.ref.max_steps
        return turn is not None and limit is not None and len(turn.steps) >= limit

    @rule()
    def wait_idle(self) -> None:
        """`wait_idle()` must return exactly when the reference is idle (or closed)."""
        returned = self.host.call(self._wait_idle_if_it_returns)
        expected = self.ref.status != "running"
        WAIT_IDLE_RETURNS.check(
            returned is expected,
            lambda: (
                f"wait_idle() {'returned' if returned else 'blocked'} while the agent "
                f"should be {self._describe()}"
            ),
        )

    @precondition(lambda self: self.ref.status != "closed" and self._steps >= CLOSE_AFTER)
    @rule()
    def close(self) -> None:
        """Close the agent mid-program (its factory's context exits); later rules go on
        checking the CLOSED agent (A9, A10)."""
        self._close(None)
        self._check_closed()

    @precondition(lambda self: self.ref.turn is not None and self._steps >= CLOSE_AFTER // 2)
    @rule(cause=st.sampled_from(["user", "parent"]))
    def cancel_then_close(self, cause: Literal["user", "parent"]) -> None:
        """Cancel the running turn and close the agent in one go: the close reaches the turn
        while it unwinds, and must not rewrite its first cause (A8)."""
        self._close(cause)
        self._check_closed()

    @precondition(lambda self: _exploring(self) and self.ref.status != "closed")
    @rule(cancel_spawned_first=st.booleans())
    def race_cancel_and_send(self, cancel_spawned_first: bool) -> None:
        """cancel() and send() from two tasks started in the same scheduler batch: which
        runs first is the scheduler's choice. Both are synchronous, so the order they ran in
        is observed exactly and the reference applies them in it, with no driver step in
        between (a task they wake runs in a later batch)."""
        ran: list[tuple[str, object]] = []
        content = self._content("raced")

        async def cancel() -> None:
            before = (self._ref_pending(), self.ref.status)  # the reference, as yet unmoved
            ran.append(("cancel", (self._rule_cancel("race", "user"), before)))

        async def send() -> None:
            mid = str(self.agent.send(content))
            ran.append(("send", (mid, self.agent.status)))

        async def both() -> None:
            async with trio.open_nursery() as nursery:
                for op in (cancel, send) if cancel_spawned_first else (send, cancel):
                    nursery.start_soon(op)

        self.host.call(both)
        self._raise_observed()
        self.host.settle()
        cancelled_first = after_cancel = idle_cancel_first = after_idle_cancel = False
        sent = ""
        for op, result in ran:
            if op == "send":
                mid, status = cast("tuple[str, AgentStatus]", result)
                self.contents[mid] = content
                was = self.ref.status
                self.ref.send_nowait(mid)
                if was == "idle" and status is not AgentStatus.RUNNING:
                    STATUS_AFTER_SEND.fail(
                        f"send() of {mid} from IDLE returned with the agent {status.value}"
                    )
                sent, after_cancel, after_idle_cancel = mid, cancelled_first, idle_cancel_first
            else:
                effective, _ = cast("tuple[bool, object]", result)
                # What the agent was before the cancel, as the reference has it now.
                before = (self._ref_pending(), self.ref.status)
                expected = self.ref.cancel_now("race", "user")
                self._check_cancel(effective, expected, before, "cancel() racing a send()")
                cancelled_first, idle_cancel_first = expected, not expected
        self.ref.settle()
        if after_cancel:
            self._check_sent_runs(sent)
        if after_idle_cancel:
            self.host.settle()
            self._check_not_stranded(sent)

    @rule(event=st.sampled_from(["TurnStarted", "StepStarted", "StepEnded", "Idle"]))
    def arm(self, event: str) -> None:
        """A one-shot listener: cancel at the next TurnStarted/StepStarted/StepEnded (the
        pre-step, pre-model and continuation windows), or send at the next IDLE (the
        replacement-turn race)."""
        if event in self.ref.armed or self.ref.status == "closed":
            return
        self.ref.armed.add(event)
        kinds: dict[str, type] = {
            "TurnStarted": TurnStarted,
            "StepStarted": StepStarted,
            "StepEnded": StepEnded,
            "Idle": StatusChanged,
        }
        fired: list[bool] = []

        def listener(e: Event) -> None:
            if fired or not isinstance(e, kinds[event]):
                return
            if event == "Idle" and not (
                isinstance(e, StatusChanged) and e.status is AgentStatus.IDLE
            ):
                return
            fired.append(True)
            disconnect()
            if event == "Idle":
                content = self._content("follow-up")
                mid = str(self.agent.send(content))
                self.contents[mid] = content
                self.ref.idle_sends.append(mid)
            else:
                self.agent.cancel("armed", cause="user")

        disconnect = self.bus.connect(listener)

    @rule(event=st.sampled_from(sorted(RAISING_AT)))
    def arm_raising(self, event: str) -> None:
        """A one-shot listener that raises at the next event of a kind: the agent must
        contain it, and nothing else may change (A11)."""
        fired: list[bool] = []

        def listener(e: Event) -> None:
            if fired or not isinstance(e, RAISING_AT[event]):
                return
            fired.append(True)
            disconnect()
            raise RuntimeError(f"{LISTENER_FAILURE} at {event}")

        disconnect = self.bus.connect(listener)

    @rule()
    def start_waiter(self) -> None:
        """A wait_idle that stays parked in the background while later rules run."""
        index = len(self.waiters)
        self.waiters.append(False)

        async def wait() -> None:
            await self.agent.wait_idle()
            self.waiters[index] = True
            self._closed_too_soon("a background wait_idle()")

        self.host.start(wait)
        self.host.settle()
        self.ref.wait_idle()

    # -- rule helpers ------------------------------------------------------------------

    def _next(self) -> int:
        self._counter += 1
        return self._counter

    def _content(self, what: str) -> str:
        """A content no other message has: a request that misplaces one shows it."""
        return f"{what} {self._next()}"

    def _deliver(self, op: Any, content: str, verb: str) -> str:
        """send/steer `content`; from IDLE (or, steering, with no turn) it must be RUNNING
        as the call returns."""
        idle = self.ref.status == "idle"
        mid, status = self.host.run_sync(lambda: (str(op(content)), self.agent.status))
        self.contents[mid] = content
        STATUS_AFTER_SEND.check(
            not idle or status is AgentStatus.RUNNING,
            lambda: f"{verb}() of {mid} from IDLE returned with the agent {status.value}",
        )
        return mid

    def _rule_cancel(self, reason: str, cause: Literal["user", "parent"]) -> bool:
        self._rule_cancelling = True
        self._cancel_views.clear()
        try:
            return bool(self.agent.cancel(reason, cause=cause))
        finally:
            self._rule_cancelling = False

    def _close(self, cancel_cause: Literal["user", "parent"] | None) -> None:
        """Close the agent (after cancelling its turn, with `cancel_cause`), with a wait_idle
        started at its CLOSED StatusChanged."""
        self._arm_closed_waiter()
        before = (self._ref_pending(), self.ref.status)
        stop = self._stop
        assert stop is not None

        def begin() -> bool | None:
            effective = None
            if cancel_cause is not None:
                effective = self._rule_cancel("closing", cancel_cause)
            stop.set()
            return effective

        effective = self.host.run_sync(begin)
        self._raise_observed()
        self.host.settle()
        if cancel_cause is not None:
            expected = self.ref.cancel_now("closing", cancel_cause)
            self._check_cancel(bool(effective), expected, before, "cancel() just before a close")
        self.ref.close()

    def _arm_closed_waiter(self) -> None:
        index = len(self._closed_waits)
        self._closed_waits.append("parked")
        fired: list[bool] = []

        async def wait() -> None:
            await self.agent.wait_idle()
            self._closed_waits[index] = None
            self._closed_too_soon("a wait_idle() started at StatusChanged(CLOSED)", index)

        def listener(e: Event) -> None:
            if not fired and isinstance(e, StatusChanged) and e.status is AgentStatus.CLOSED:
                fired.append(True)
                disconnect()
                self.host.nursery.start_soon(wait)

        disconnect = self.bus.connect(listener)

    async def _wait_idle_if_it_returns(self) -> bool:
        """Whether wait_idle returns once everything has run, without letting time pass
        (which could time a held step out): a waiter still parked then is cancelled."""
        done: list[bool] = []
        async with trio.open_nursery() as nursery:

            async def wait() -> None:
                await self.agent.wait_idle()
                done.append(True)

            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        return bool(done)

    def _current_reply(self) -> Reply:
        """What the held model call (the latest) has been let stream so far."""
        self._sync_replies()
        return self.replies[-1]


def check_agent_conformance(
    factory: AgentFactory | None = None, *, settings: Settings | None = None
) -> None:
    """Run the agent state machine against `factory` (default: the built-in agent).

    Raises the shrunk failing program's error on the first violation. Plain function, no
    pytest needed: call it from any test runner.
    """
    run_state_machine_as_test(machine_for(AgentMachine, factory), settings=settings)
