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
from collections.abc import AsyncGenerator, Hashable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, ClassVar, Literal

import trio
import trio.testing
from hypothesis import Phase
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition

from trio_agents import (
    Agent,
    AgentOptions,
    AgentStatus,
    Approval,
    Event,
    EventBus,
    Message,
    Model,
    Policy,
    StatusChanged,
    TextDelta,
    Tool,
    open_agent,
)
from trio_agents.testing import HOLD, GateTool, ScriptedStep

from ._agent_checks import Reply
from ._agent_harness import (
    MachineGate,
    MachineHost,
    MachineModel,
    QuietListenerFailures,
    RandomSeeder,
    answer_step,
    is_neighbours,
)
from ._agent_properties import (
    CLOSED_REFUSES,
    CUT_REPLY_CALLS_NOT_RUN,
    HISTORY_VALID,
    INJECT_NEVER_WAKES,
    PROPERTIES,
    STATUS_AFTER_SEND,
    WAIT_IDLE_CHECKPOINTS,
    WAIT_IDLE_RETURNS,
)
from ._agent_streams import AgentStreams
from ._agent_tracing import MachineTrace, trace_of
from ._agent_verify import summarize_turns
from ._approval_window import STEP_TIMEOUT, policy_for, takes_approval
from ._approver import HeldApprover
from ._decision_sweep import sweep_decisions
from ._features import Features, features_of
from ._history import history_problems
from ._machine import machine_for, rule
from ._properties import Property
from ._reference import POLICY_KINDS, AgentReference, PolicyKind
from ._target import check_agent_shape, check_factory_call
from ._targets import AgentFactory

__all__ = [
    "PROPERTIES",
    "AgentFactory",
    "AgentMachine",
    "RandomSeeder",
    "agent_machine_for",
    "summarize_turns",
]

# A close ends what a program can explore: it is enabled only once this many steps ran.
CLOSE_AFTER = 12


def agent_settings(settings: Settings) -> Settings:
    """The agent machine's budget from a profile's: without Hypothesis's explain phase,
    which reruns a shrunk failure many times to list the lines only failures ran, a third
    of the cost of a failure, and of no help in reading a named property's violation."""
    return Settings(settings, phases=[p for p in settings.phases if p is not Phase.explain])


def builtin_agent_factory(
    model: Model,
    tools: Sequence[Tool],
    events: EventBus,
    options: AgentOptions,
    approval: Approval | None = None,
) -> AbstractAsyncContextManager[Agent]:
    return open_agent(model, tools=tools, events=events, options=options, approval=approval)


class AgentMachine(AgentStreams):
    """Subclass and set `factory` to check another implementation, and `features` to say
    what it has (default: what the factory's `conformance_features` attribute declares).

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
    has: the `Features` the agent is checked on; a rule of a missing one never runs.
    approver: the HeldApprover the agent asks before each tool call, in an example drawn
        to ask (None otherwise, or for an agent without `approval`).
    expected_approvals: per tool call of an asking agent, the (decision, by) its
        `tool/approval` record must hold, or None while (or if never) decided.
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
        # Listeners connected after armed ones: (len(events) when connected, what it saw).
        self.witnesses: list[tuple[int, list[Event]]] = []
        # The machine's own record of the agent's events: a neighbour's (V1) are not its.
        self.bus.connect(lambda e: None if is_neighbours(e) else self.events.append(e))
        # Connected first: it sees each event before any armed listener acts on it.
        self.bus.connect(self._observe)
        self.bus.connect(self._neighbour_echoes)
        self.waiters: list[bool] = []  # one flag per background wait_idle: has it returned?
        self.ref = AgentReference()
        self.agent: Any = None
        self.trace: MachineTrace | None = None  # the built-in agent's spans (O1, O2)
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
        self.approver: HeldApprover | None = None
        self.policy: Policy | None = None  # the Approval's policy, when the agent asks
        self.expected_approvals: dict[str, tuple[str, str] | None] = {}
        self._asking: str | None = None  # the call the approver should hold, if any
        self._ended_waiting: set[str] = set()  # calls whose wait ended without a decision
        self._probed_two_calls = False  # the A18 probe of two waiting calls (once)
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
        ask=st.booleans(),
        # The default policy half the time: most users keep it, and its remembered
        # answers need programs of their own (A17).
        policy=st.one_of(st.just("ask"), st.sampled_from(POLICY_KINDS)),
    )
    def open_agent(
        self,
        max_steps: int | None,
        step_timeout: float | None,
        scheduler: Any,
        ask: bool = False,
        policy: PolicyKind = "ask",
    ) -> None:
        """`scheduler` reseeds trio's scheduler randomness (registered with Hypothesis), so
        the order of tasks in a batch is part of the example: explored, shrunk, replayed.
        A printed reproduction passes our `RandomSeeder` to do the same outside Hypothesis.
        With `ask`, the agent is given an Approval whose policy (`policy`) asks the machine's
        approver before every tool call, or decides every call itself (A14-A18)."""
        if isinstance(scheduler, RandomSeeder):
            scheduler.apply()
        has = self.has
        # An option the agent does not honour is never set (drawn all the same, so the
        # programs of a full agent and of one without it are drawn alike).
        max_steps = max_steps if has.max_steps else None
        step_timeout = step_timeout if has.step_timeout else None
        factory: Any = type(self).factory
        approval: dict[str, Approval] = {}
        if has.approval and not takes_approval(factory):
            type(self).stats["without approval"] = 1  # checked without it, as if declared
        elif ask and has.approval:
            self.approver = HeldApprover()
            self.policy = policy_for(policy, self.gate.name)
            approval["approval"] = Approval(self.policy, self.approver)
        self.ref = AgentReference(
            max_steps=max_steps,
            step_timeout=step_timeout,
            steering_at_step_limit=has.steering_at_step_limit,
            cancel_after_final_answer=has.cancel_after_final_answer,
            asks=bool(approval),
            policy=policy,
        )
        options = AgentOptions(max_steps=max_steps, step_timeout=step_timeout)
        check_factory_call(factory, self.model, [self.gate], self.bus, options, **approval)

        @asynccontextmanager
        async def opened() -> AsyncGenerator[Any]:
            # Checked before the service counts as started: the example then ends cleanly.
            async with factory(self.model, [self.gate], self.bus, options, **approval) as agent:
                check_agent_shape(agent, has)
                self.trace = trace_of(agent)
                yield agent

        self.agent = self._start_service(opened)
        self.model.records = lambda: len(self.agent.session.records)
        gate: Any = self.gate
        gate.records = self.model.records
        self.host.settle()
        if self.approver is not None and policy == "ask":
            # Every answer an approver can give, on agents of their own (A14-A17).
            self.host.call(sweep_decisions, factory)
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
        self._check_streams_at_close()
        self._check_trace(self.records)
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
        self._accepted(mid)

    def _accepted(self, mid: str) -> None:
        self.ref.send(mid)
        if self._idle_cancelled:
            self._idle_cancelled = False
            self._check_not_stranded(mid)

    @rule(count=st.integers(2, 3))
    def send_several(self, count: int) -> None:
        """Send prompts back to back: they queue in the order sent, one turn each (A2)."""
        for _ in range(count):
            self.send()

    @precondition(lambda self: self.has.steer)
    @rule()
    def steer(self) -> None:
        """Steer: steering for the running turn, or a prompt without one."""
        if self._refused("steer"):
            return
        mid = self._deliver(self.agent.steer, self._content("steering"), "steer")
        self.host.settle()
        self.ref.steer(mid)
        if self._idle_cancelled:  # with no turn, steering is a prompt: stranded by it?
            self._idle_cancelled = False
            self._check_not_stranded(mid)

    @precondition(lambda self: self.has.inject)
    @rule(role=st.sampled_from(["str", "user", "system"]))
    def inject(self, role: Literal["str", "user", "system"]) -> None:
        """Inject context for the next step, as a str or a Message of role user or system
        (user, for an agent without `system_context`): it never wakes the agent (A4)."""
        if self._refused("inject"):
            return
        if role == "system" and not self.has.system_context:
            role = "user"
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
    @rule(answer=st.sampled_from(["text", "tool", "cut"]), usage=st.booleans())
    def release_model(self, answer: Literal["text", "tool", "cut"], usage: bool = False) -> None:
        """Let the held model call answer (the rest of) its reply: text, a call of the gate
        tool, or text and a call cut at the token limit (finish `length`), whose call must
        not run (A13): the step ends as after text; with `usage`, its finish reports tokens,
        as most providers' do."""
        n = self._next()
        if answer == "cut" and not self.has.length_cut:
            answer = "text"
        step = answer_step(answer, n, self.gate.name, self._current_reply(), usage=usage)
        if answer == "tool":
            self._note_call(f"call-{n}")
        self.host.run_sync(self.model.release, step)
        self.host.settle()
        if answer == "cut":
            ran = [context.call_id for _, context in self.gate.calls]
            CUT_REPLY_CALLS_NOT_RUN.check(
                f"call-{n}" not in ran,
                lambda: (
                    f"a reply cut at the token limit (finish 'length') asked for call-{n}, "
                    "and the tool received it"
                ),
            )
        self.ref.release_model("tool" if answer == "tool" else "text")

    @precondition(lambda self: self.ref.phase == "model")
    @rule()
    def tool_round(self) -> None:
        """The held model call asks for the gate tool and the call returns (unless it waits
        for a decision): a step of a tool call and its result, and the turn's next model
        call. A random program seldom releases a tool reply and then the tool in a row, and
        a turn's multi-step story (the history each request holds, steps and usage summed
        over the turn) needs it."""
        self.release_model("tool")
        if self.ref.phase == "tool":
            self.finish_tool()

    @precondition(lambda self: self.has.partial_replies and self.ref.phase == "model")
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

    @precondition(lambda self: self.has.step_timeout)
    @rule(seconds=st.sampled_from([30.0, 50.0, STEP_TIMEOUT]))
    def time_passes(self, seconds: float) -> None:
        """Trio time moves on (free with the autojump clock): a held step may time out."""
        self.host.run_sync(self.clock.jump, seconds)
        self.host.settle()
        self.ref.time_passes(seconds)

    @precondition(
        lambda self: (
            self.has.steer and self.ref.phase in ("model", "tool") and self._turn_can_end_here()
        )
    )
    @rule()
    def steer_as_the_turn_ends(self) -> None:
        """Steer in the turn's last step, then end that step so the turn ends with the
        steering unconsumed: the step times out, or it is the last `max_steps` allows and
        returns. That steering must become the next prompt, ahead of the queue (A3), or,
        with `steering_at_step_limit="answer"`, be answered by one more step. A random
        program reaches this window rarely, so it is a rule of its own."""
        self.steer()
        if self.ref.step_timeout is not None:
            self.time_passes(STEP_TIMEOUT)
        elif self.ref.phase == "model":
            self.release_model("text")
        else:
            self.finish_tool()

    @precondition(
        lambda self: (
            self.has.listener_windows
            and self.ref.phase == "model"
            and "StepEnded" not in self.ref.armed
            and not any(kind == "steering" for _, kind in self.ref.step_input)
        )
    )
    @rule()
    def cancel_at_the_final_answer(self) -> None:
        """Arm a StepEnded listener that cancels, then let the model give the turn's final
        answer: the cancel lands after the answer and before the turn ends, where the
        declared `cancel_after_final_answer` design decides the turn's end (A8). A random
        program reaches this window rarely, so it is a rule of its own."""
        self.arm("StepEnded")
        self.release_model("text")

    def _turn_can_end_here(self) -> bool:
        if self.ref.step_timeout is not None:
            return True
        turn, limit = self.ref.turn, self.ref.max_steps
        return turn is not None and limit is not None and len(turn.steps) >= limit

    @rule()
    def wait_idle(self) -> None:
        """`wait_idle()` must return exactly when the reference is idle (or closed), and
        always after a checkpoint."""
        returned = self.host.call(self._wait_idle_if_it_returns)
        expected = self.ref.status != "running"
        WAIT_IDLE_RETURNS.check(
            returned is expected,
            lambda: (
                f"wait_idle() {'returned' if returned else 'blocked'} while the agent "
                f"should be {self._describe()}"
            ),
        )
        checkpointed = self.host.call(self._wait_idle_checkpoints)
        WAIT_IDLE_CHECKPOINTS.check(
            checkpointed,
            lambda: (
                f"wait_idle() in a cancelled scope returned without raising Cancelled, "
                f"the agent {self._describe()}"
            ),
        )

    async def _wait_idle_checkpoints(self) -> bool:
        with trio.CancelScope() as scope:
            scope.cancel()
            await self.agent.wait_idle()
        return scope.cancelled_caught

    @precondition(lambda self: self.ref.status != "closed" and self._steps >= CLOSE_AFTER)
    @rule()
    def close(self) -> None:
        """Close the agent mid-program (its factory's context exits); later rules go on
        checking the CLOSED agent (A9, A10)."""
        self._close(None)
        self._check_closed()

    @precondition(
        lambda self: (
            self.has.close_while_cancelling
            and self.ref.turn is not None
            and self._steps >= CLOSE_AFTER // 2
        )
    )
    @rule(cause=st.sampled_from(["user", "parent"]))
    def cancel_then_close(self, cause: Literal["user", "parent"]) -> None:
        """Cancel the running turn and close the agent in one go: the close reaches the turn
        while it unwinds, and must not rewrite its first cause (A8)."""
        self._close(cause)
        self._check_closed()

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


def agent_machine_for(
    factory: AgentFactory | None, features: Features | None = None
) -> type[AgentMachine]:
    """A fresh `AgentMachine` subclass checking `factory` (default: the built-in agent) on
    `features` (default: what the factory declares). Raises TypeError for a declaration
    that is not a `Features`."""
    machine = machine_for(AgentMachine, factory)
    machine.features = features if features is not None else features_of(machine.factory)
    return machine
