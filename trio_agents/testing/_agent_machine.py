"""The agent state machine: random programs of send, steer, inject, cancel, model and tool
releases and wait_idle, checked after every step against `AgentReference`.

Each example owns one `TrioHost`. After every rule the host settles (every task blocked), and
the agent must then match the reference exactly: status, the turns with their prompt, the
messages claimed before each step and the end reasons, the number of model calls, which gate
is held, and every message's fate.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, Literal

import trio
import trio.testing
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
    TurnStarted,
)
from .._model import Model
from .._options import AgentOptions
from .._records import (
    MESSAGE_RECORD_TYPES,
    STEP_START,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Record,
)
from .._standalone import open_agent
from .._status import AgentStatus
from .._tool import Tool
from ._history import history_problems
from ._host import TrioHost
from ._machine import ConformanceMachine, machine_for, rule
from ._properties import Property
from ._reference import AgentReference, StepSummary, TurnSummary
from ._scripted import GateTool, ScriptedModel, reply, tool_step
from ._targets import AgentFactory

__all__ = [
    "PROPERTIES",
    "AgentFactory",
    "AgentMachine",
    "RandomSeeder",
    "check_agent_conformance",
    "summarize_turns",
]

PROPERTIES: tuple[Property, ...] = ()
"""The properties this machine checks, each of one rule of the contract."""

STEP_TIMEOUT = 100.0  # trio seconds; time only passes in the `time_passes` rule


class RandomSeeder:
    """Replays a scheduler seed Hypothesis drew (printed as `RandomSeeder(n)` in a shrunk
    program): it seeds `random` and trio's scheduler randomness as Hypothesis did.

    seed: the seed.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __repr__(self) -> str:
        return f"RandomSeeder({self.seed})"

    def apply(self) -> None:
        """Seed `random` and trio's scheduler with `seed`."""
        random.seed(self.seed)
        # trio's batch shuffle draws from this module-level Random, which trio registers
        # with Hypothesis; there is no public handle on it.
        scheduler_random = getattr(trio._core._run, "_r", None)  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
        if isinstance(scheduler_random, random.Random):
            scheduler_random.seed(self.seed)


def _exploring(machine: AgentMachine) -> bool:
    return type(machine).explore_schedules


def builtin_agent_factory(
    model: Model, tools: Sequence[Tool], events: EventBus, options: AgentOptions
) -> AbstractAsyncContextManager[Agent]:
    return open_agent(model, tools=tools, events=events, options=options)


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


class AgentMachine(ConformanceMachine):
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
        super().__init__(TrioHost(self.clock))
        self.model = ScriptedModel(hold_all=True)
        self.gate = GateTool()
        self.bus = EventBus()
        self.events: list[Event] = []
        self.bus.connect(self.events.append)
        self.waiters: list[bool] = []  # one flag per background wait_idle: has it returned?
        self.ref = AgentReference()
        self.agent: Any = None

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
        self.host.settle()

    def _history(self) -> Hashable | None:
        opened: Any = self.agent
        if opened is None:
            return None
        kinds = tuple(record.type for record in opened.session.records)
        return (kinds, tuple(self.ref.status_trace))

    def _check_closing(self) -> None:
        self._stop_service()
        self.ref.close()
        assert self.agent.status is AgentStatus.CLOSED, self.agent.status
        self._check_events()
        records = self.agent.session.records
        problems = history_problems(records, allow_open_turn=False)
        assert not problems, f"history after close: {problems}"
        self._compare_turns()

    # -- rules ---------------------------------------------------------------------------

    @rule()
    def send(self) -> None:
        """Send a prompt."""
        mid = self.host.run_sync(self.agent.send, "prompt")
        self.host.settle()
        self.ref.send(str(mid))

    @rule()
    def steer(self) -> None:
        """Steer: steering for the running turn, or a prompt without one."""
        mid = self.host.run_sync(self.agent.steer, "steering")
        self.host.settle()
        self.ref.steer(str(mid))

    @rule()
    def inject(self) -> None:
        """Inject context for the next step."""
        mid = self.host.run_sync(self.agent.inject, "context")
        self.host.settle()
        self.ref.inject(str(mid))

    @rule(cause=st.sampled_from(["user", "parent"]), reason=st.sampled_from(["stop", "enough"]))
    def cancel(self, cause: Literal["user", "parent"], reason: str) -> None:
        """Cancel; `cancel()` must say whether it was effective as the reference does."""
        effective = self.host.run_sync(lambda: self.agent.cancel(reason, cause=cause))
        self.host.settle()
        expected = self.ref.cancel(reason, cause)
        assert effective is expected, (
            f"cancel() returned {effective}, expected {expected} (reference: {self._state()})"
        )

    @precondition(lambda self: self.ref.phase == "model")
    @rule(answer=st.sampled_from(["text", "tool"]))
    def release_model(self, answer: Literal["text", "tool"]) -> None:
        """Let the held model call answer with text, or with a call of the gate tool."""
        step = reply("answer") if answer == "text" else tool_step((self.gate.name, {}))
        self.host.run_sync(self.model.release, step)
        self.host.settle()
        self.ref.release_model(answer)

    @precondition(lambda self: self.ref.phase == "tool")
    @rule()
    def finish_tool(self) -> None:
        """Let the held tool call return."""
        self.host.run_sync(self.gate.release, "tool output")
        self.host.settle()
        self.ref.finish_tool()

    @rule(seconds=st.sampled_from([30.0, 50.0]))
    def time_passes(self, seconds: float) -> None:
        """Trio time moves on (free with the autojump clock): a held step may time out."""
        self.host.run_sync(self.clock.jump, seconds)
        self.host.settle()
        self.ref.time_passes(seconds)

    @rule()
    def wait_idle(self) -> None:
        """`wait_idle()` must return exactly when the reference is idle."""
        returned = self.host.call(self._wait_idle_if_it_returns)
        expected = self.ref.status == "idle"
        assert returned is expected, (
            f"wait_idle {'returned' if returned else 'blocked'} but the reference is "
            f"{self.ref.status} (reference: {self._state()})"
        )
        if returned:
            assert self.agent.status is AgentStatus.IDLE, self.agent.status

    @precondition(_exploring)
    @rule(cancel_spawned_first=st.booleans())
    def race_cancel_and_send(self, cancel_spawned_first: bool) -> None:
        """cancel() and send() from two tasks started in the same scheduler batch: which
        runs first is the scheduler's choice. Both are synchronous, so the order they ran in
        is observed exactly and the reference applies them in it, with no driver step in
        between (a task they wake runs in a later batch)."""
        ran: list[tuple[str, object]] = []

        async def cancel() -> None:
            ran.append(("cancel", self.agent.cancel("race", cause="user")))

        async def send() -> None:
            ran.append(("send", self.agent.send("raced")))

        async def both() -> None:
            async with trio.open_nursery() as nursery:
                for op in (cancel, send) if cancel_spawned_first else (send, cancel):
                    nursery.start_soon(op)

        self.host.call(both)
        self.host.settle()
        for op, result in ran:
            if op == "send":
                self.ref.send_nowait(str(result))
            else:
                expected = self.ref.cancel_now("race", "user")
                assert result is expected, (
                    f"cancel() in a race returned {result}, expected {expected} (ran: {ran})"
                )
        self.ref.settle()

    @rule(event=st.sampled_from(["TurnStarted", "StepStarted", "StepEnded", "Idle"]))
    def arm(self, event: str) -> None:
        """A one-shot listener: cancel at the next TurnStarted/StepStarted/StepEnded (the
        pre-step, pre-model and continuation windows), or send at the next IDLE (the
        replacement-turn race)."""
        if event in self.ref.armed:
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
                self.ref.idle_sends.append(str(self.agent.send("follow-up")))
            else:
                self.agent.cancel("armed", cause="user")

        disconnect = self.bus.connect(listener)

    @rule()
    def start_waiter(self) -> None:
        """A wait_idle that stays parked in the background while later rules run."""
        index = len(self.waiters)
        self.waiters.append(False)

        async def wait() -> None:
            await self.agent.wait_idle()
            self.waiters[index] = True

        self.host.start(wait)
        self.host.settle()
        self.ref.wait_idle()

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

    # -- invariants ----------------------------------------------------------------------

    def _ready(self) -> bool:
        return self.agent is not None

    def _verify(self) -> None:
        """Everything the reference determines, after every rule."""
        status = self.agent.status
        assert status.value == self.ref.status, (
            f"status is {status.value}, reference says {self.ref.status} ({self._state()})"
        )
        problems = history_problems(self.agent.session.records)
        assert not problems, f"invalid history: {problems}"
        self._check_fates()
        self._compare_turns()
        assert len(self.model.requests) == self.ref.requests, (
            f"{len(self.model.requests)} model calls, reference expects {self.ref.requests}"
        )
        held = (int(self.ref.phase == "model"), int(self.ref.phase == "tool"))
        assert (self.model.held, self.gate.held) == held, (
            f"held (model, tool) = {(self.model.held, self.gate.held)}, expected {held}"
        )
        self._check_events()

    def _check_events(self) -> None:
        statuses = [e.status.value for e in self.events if isinstance(e, StatusChanged)]
        assert statuses == self.ref.status_trace, (
            f"StatusChanged reported {statuses}, reference expects {self.ref.status_trace}"
        )
        cancels = [(e.cause, e.reason) for e in self.events if isinstance(e, CancelRequested)]
        assert cancels == self.ref.cancels, (
            f"CancelRequested events {cancels}, reference expects one per effective cancel: "
            f"{self.ref.cancels}"
        )
        parked = self.waiters.count(False)
        assert parked == self.ref.waiting, (
            f"{parked} wait_idle calls still parked, reference expects {self.ref.waiting} "
            f"({self._state()})"
        )

    def _check_fates(self) -> None:
        seen: dict[str, int] = {}
        for record in self.agent.session.records:
            if record.type in MESSAGE_RECORD_TYPES:
                mid = str(record.data["id"])
                seen[mid] = seen.get(mid, 0) + 1
        twice = [mid for mid, count in seen.items() if count > 1]
        assert not twice, f"messages delivered more than once: {twice}"
        for mid, fate in self.ref.fate.items():
            assert (mid in seen) == (fate == "delivered"), (
                f"message {mid} should be {fate} but {'is' if mid in seen else 'is not'} in "
                f"the session records ({self._state()})"
            )
        pending = getattr(self.agent, "pending", None)
        if pending is not None:
            expected = {mid for mid, fate in self.ref.fate.items() if fate == "pending"}
            assert {str(mid) for mid, _ in pending} == expected

    # -- helpers -------------------------------------------------------------------------

    def _compare_turns(self) -> None:
        actual = summarize_turns(self.agent.session.records)
        assert actual == self.ref.turns, (
            "turns differ from the reference:\n"
            f"  actual:    {actual}\n  reference: {self.ref.turns}"
        )

    def _state(self) -> str:
        ref = self.ref
        return (
            f"status={ref.status} phase={ref.phase} queue={ref.queue} step_input={ref.step_input}"
        )


def check_agent_conformance(
    factory: AgentFactory | None = None, *, settings: Settings | None = None
) -> None:
    """Run the agent state machine against `factory` (default: the built-in agent).

    Raises the shrunk failing program's error on the first violation. Plain function, no
    pytest needed: call it from any test runner.
    """
    run_state_machine_as_test(machine_for(AgentMachine, factory), settings=settings)
