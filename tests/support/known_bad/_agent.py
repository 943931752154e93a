"""Known-bad agents: each is the real agent with one seeded defect."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any
from unittest import mock

import trio

from agent_conformance import AgentObserver, observed
from examples.observed_trio_agents import (
    ObservedTrioAgent,
    relay_event,
    relay_record,
)
from trio_agents import (
    Agent,
    AgentOptions,
    AgentStatus,
    Approval,
    CancelCause,
    CancelRequested,
    Event,
    EventBus,
    Message,
    MessageId,
    Model,
    ModelChunk,
    ModelRequest,
    Record,
    Session,
    Tool,
    TurnStarted,
    Usage,
    _tracing,  # pyright: ignore[reportPrivateUsage]
    open_agent,
)
from trio_agents._agent import _step
from trio_agents._agent._inbox import Inbox, InboxMessage, MessageKind
from trio_agents._agent._turn import Turn

from ._seeded import Seeded


class _ForgetfulInbox(Inbox):
    __slots__ = ()

    def requeue_steering(self) -> list[InboxMessage]:
        steering = frozenset(m.id for m in self if m.kind == "steering")
        self.discard_work(only=steering)
        return []


class SteeringLostAtTurnEnd(Agent):
    """(f) Steering a turn did not consume is silently dropped when the turn ends, instead
    of being re-queued as a prompt."""

    __slots__ = ()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inbox = _ForgetfulInbox()


class IdleCancelEmits(Agent):
    """(b) An idle cancel emits CancelRequested and reports success."""

    __slots__ = ()

    def cancel(self, reason: str = "cancelled", *, cause: CancelCause = "user") -> bool:
        if super().cancel(reason, cause=cause):
            return True
        return self.status.value != "closed"


def factory_for(cls: type[Agent], session: type[Session] = Session):  # type: ignore[no-untyped-def] # pyright: ignore
    """A target: an agent of `cls` recording into a session of `session`'s class (a session
    that loses some records stands for an agent that never makes them)."""

    def factory(
        model: Model, tools: Sequence[Tool], events: EventBus, options: AgentOptions
    ) -> AbstractAsyncContextManager[Agent]:
        return open_agent(
            model,
            tools=tools,
            events=events,
            options=options,
            session=session("bad"),
            agent_class=cls,
        )

    factory.__name__ = (session if session is not Session else cls).__name__.strip("_")
    return factory


class _LossySession(Session):
    """A session whose `append` loses the records `lost` picks: they are returned, as made,
    but never reach the history (nor the store, nor the next request)."""

    __slots__ = ()

    def lost(self, type: str, data: Mapping[str, object]) -> bool:
        return False

    def append(self, type: str, data: Mapping[str, Any]) -> Record:
        if self.lost(type, data):
            return Record.of(type, data)
        return super().append(type, data)


steering_lost_at_turn_end = factory_for(SteeringLostAtTurnEnd)
idle_cancel_emits = factory_for(IdleCancelEmits)


class QueuedPromptBatchedIntoCancelledTurn(Agent):
    """(a) A cancel takes the queued prompts into the cancelled turn's history (as the
    harness's first era batched them) instead of discarding them."""

    __slots__ = ()

    def cancel(self, reason: str = "cancelled", *, cause: CancelCause = "user") -> bool:
        turn = self._turn  # pyright: ignore[reportPrivateUsage]
        if turn is not None and not turn.cancelled:
            while (prompt := self._inbox.pop_prompt()) is not None:  # pyright: ignore[reportPrivateUsage]
                self.session.append("user/message", {"id": prompt.id, "content": prompt.content})
        return super().cancel(reason, cause=cause)


class WaitIdleAtTurnBoundary(Agent):
    """(e) `wait_idle` returns when a turn ends, even though a queued prompt has not
    started yet."""

    __slots__ = ()

    async def wait_idle(self) -> None:
        await trio.lowlevel.checkpoint()
        start = len(self.session)
        while self.status.value == "running":
            await trio.lowlevel.checkpoint()
            if any(r.type == "turn/end" for r in self.session.records[start:]):
                return
            await self._settled.park()  # pyright: ignore[reportPrivateUsage]
        if self.status.value == "closed":
            await super().wait_idle()  # the closed case is right: it waits for the loop

    async def _run_turn(self, prompt: InboxMessage) -> None:
        await super()._run_turn(prompt)  # pyright: ignore[reportPrivateUsage]
        self._settled.unpark_all()  # pyright: ignore[reportPrivateUsage]  # wakes waiters early


class _ToolResultMissingAfterCancel(_LossySession):
    """(h) A cancelled turn records no result for the tool calls it interrupted."""

    __slots__ = ()

    def lost(self, type: str, data: Mapping[str, object]) -> bool:
        return type == "tool/result" and bool(data.get("interrupted"))


queued_prompt_batched_into_cancelled_turn = factory_for(QueuedPromptBatchedIntoCancelledTurn)
wait_idle_at_turn_boundary = factory_for(WaitIdleAtTurnBoundary)
tool_result_missing_after_cancel = factory_for(Agent, _ToolResultMissingAfterCancel)


class SendDroppedRightAfterCancel(Agent):
    """A send that lands right after an effective cancel, in the same scheduler batch (before
    the driver has run again), is silently dropped: the harness's first era kept a pre-run
    "cancel requested" marker that swallowed it. Reachable only when the two operations share
    a batch, so only schedule exploration finds it."""

    __slots__ = ("_just_cancelled",)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._just_cancelled = False

    def cancel(self, reason: str = "cancelled", *, cause: CancelCause = "user") -> bool:
        effective = super().cancel(reason, cause=cause)
        self._just_cancelled = self._just_cancelled or effective
        return effective

    def send(self, content: str) -> MessageId:
        if self._just_cancelled:
            return MessageId(f"m{next(self._message_ids)}")  # pyright: ignore[reportPrivateUsage]
        return super().send(content)

    async def _run_turn(self, prompt: InboxMessage) -> None:
        try:
            await super()._run_turn(prompt)  # pyright: ignore[reportPrivateUsage]
        finally:
            self._just_cancelled = False  # the driver has run: the marker is consumed

    def _settle(self) -> None:
        self._just_cancelled = False
        super()._settle()  # pyright: ignore[reportPrivateUsage]


send_dropped_right_after_cancel = factory_for(SendDroppedRightAfterCancel)


class SendLeavesStatusIdle(Agent):
    """(A1) `send` from IDLE only wakes the loop; the loop sets RUNNING when it takes the
    prompt, so `send(x); await wait_idle()` can return before x's turn."""

    __slots__ = ()

    def _wake_driver(self) -> None:
        self._wake.ring()  # pyright: ignore[reportPrivateUsage]

    async def _run_turn(self, prompt: InboxMessage) -> None:
        self._set_status(AgentStatus.RUNNING)  # pyright: ignore[reportPrivateUsage]
        await super()._run_turn(prompt)  # pyright: ignore[reportPrivateUsage]


class _LastInFirstOutInbox(Inbox):
    __slots__ = ()

    def push(self, message: InboxMessage) -> None:
        if message.kind == "prompt":
            self._prompts.insert(0, message)  # pyright: ignore[reportPrivateUsage]
        else:
            super().push(message)


class PromptsRunNewestFirst(Agent):
    """(A2) A sent prompt is queued at the head, not the tail: queued prompts run newest
    first (re-queued steering still runs first, as A3 wants)."""

    __slots__ = ()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inbox = _LastInFirstOutInbox()


class InjectWakesIdleAgent(Agent):
    """(A4) `inject` wakes the loop as `send` does, so an IDLE agent turns RUNNING for a
    moment with nothing to run."""

    __slots__ = ()

    def inject(self, message: Message | str) -> MessageId:
        mid = super().inject(message)
        self._wake_driver()  # pyright: ignore[reportPrivateUsage]
        return mid


class IdleCancelStrandsNextPrompt(Agent):
    """(A5) A cancel with nothing to cancel returns False but is kept, and applied to the
    next turn when it starts (once its TurnStarted is out): the next prompt's turn is
    aborted at once."""

    __slots__ = ("_early_cancel",)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._early_cancel: tuple[str, CancelCause] | None = None
        self.events.connect(self._apply_early_cancel)

    def cancel(self, reason: str = "cancelled", *, cause: CancelCause = "user") -> bool:
        effective = super().cancel(reason, cause=cause)
        if not effective and self.status is AgentStatus.IDLE:
            self._early_cancel = (reason, cause)
        return effective

    def _apply_early_cancel(self, event: Event) -> None:
        if (
            isinstance(event, TurnStarted)
            and event.agent_id == self.id
            and self._early_cancel is not None
        ):
            (reason, cause), self._early_cancel = self._early_cancel, None
            self.cancel(reason, cause=cause)


class CancelClearsBeforeEmitting(Agent):
    """(A6) An effective cancel of a running turn clears the queue and the steering first,
    then announces CancelRequested: its listeners no longer see what is being cancelled."""

    __slots__ = ()

    def cancel(self, reason: str = "cancelled", *, cause: CancelCause = "user") -> bool:
        turn = self._turn  # pyright: ignore[reportPrivateUsage]
        if self.status is not AgentStatus.CLOSED and turn is not None and not turn.cancelled:
            self._inbox.discard_work()  # pyright: ignore[reportPrivateUsage]
        return super().cancel(reason, cause=cause)


class CloseOverwritesFirstCause(Agent):
    """(A8) Closing sets the running turn's cause to `closed` instead of claiming it: a turn
    a user cancel reached first ends `closed`, not `aborted` with the user's cause."""

    __slots__ = ()

    def _begin_close(self) -> None:
        if self._closing and self.status is AgentStatus.CLOSED:  # pyright: ignore[reportPrivateUsage]
            return
        self._closing = True  # pyright: ignore[reportPrivateUsage]
        self._inbox.discard_work()  # pyright: ignore[reportPrivateUsage]
        turn: Turn | None = self._turn  # pyright: ignore[reportPrivateUsage]
        if turn is not None:
            turn.reason, turn.cause = "closed", "closed"  # not turn.cancel(): no claim
            turn.scope.cancel()
        self._set_status(AgentStatus.CLOSED)  # pyright: ignore[reportPrivateUsage]
        if not self._loop_started:  # pyright: ignore[reportPrivateUsage]
            self._exited = True  # pyright: ignore[reportPrivateUsage]
        self._wake.ring()  # pyright: ignore[reportPrivateUsage]
        self._settled.unpark_all()  # pyright: ignore[reportPrivateUsage]


class _PartialReplyDropped(_LossySession):
    """(A8) Only whole replies are recorded: the text a cut step had streamed is lost."""

    __slots__ = ()

    def lost(self, type: str, data: Mapping[str, object]) -> bool:
        return type == "assistant/message" and bool(data.get("interrupted"))


class WaitIdleOnClosedReturnsAtOnce(Agent):
    """(A9) `wait_idle` returns as soon as the agent is not RUNNING, also when it is CLOSED
    but its loop is still unwinding the closing turn."""

    __slots__ = ()

    async def wait_idle(self) -> None:
        await trio.lowlevel.checkpoint()
        while self.status is AgentStatus.RUNNING:
            await self._settled.park()  # pyright: ignore[reportPrivateUsage]


class InjectAcceptedAfterClose(Agent):
    """(A10) `inject` skips the closed check (context starts no turn, so it seemed harmless):
    a CLOSED agent accepts it."""

    __slots__ = ()

    def _accept(
        self, verb: str, content: str, kind: MessageKind, *, system: bool = False
    ) -> InboxMessage:
        if verb == "inject" and self._closing:  # pyright: ignore[reportPrivateUsage]
            message = InboxMessage(f"m{next(self._message_ids)}", content, kind, system)  # pyright: ignore[reportPrivateUsage]
            self._inbox.push(message)  # pyright: ignore[reportPrivateUsage]
            return message
        return super()._accept(verb, content, kind, system=system)  # pyright: ignore[reportPrivateUsage]


class _UnguardedBus(EventBus):
    """The listeners of `bus`, delivered to with a copy of its loop that lost the `except`."""

    __slots__ = ()

    def __init__(self, bus: EventBus) -> None:
        super().__init__()
        self._listeners = bus._listeners  # pyright: ignore[reportPrivateUsage]  # shared

    def emit(self, event: Event) -> None:
        self._queue.append(event)
        if self._delivering:
            return
        self._delivering = True
        try:
            while self._queue:
                current = self._queue.popleft()
                for listener in tuple(self._listeners):
                    listener(current)
        finally:
            self._delivering = False


class ListenerErrorEscapes(Agent):
    """(A11) The agent delivers its events with a copy of the bus's loop that lost the
    `except`: a listener that raises breaks the call or the turn that emitted."""

    __slots__ = ()

    def __init__(self, *, events: EventBus | None = None, **kwargs: Any) -> None:
        super().__init__(events=_UnguardedBus(events or EventBus()), **kwargs)


class _ReentrantBus(EventBus):
    """The listeners of `bus`, delivered to at once, even from inside a listener: no queue,
    so an event a listener causes overtakes the one being delivered."""

    __slots__ = ()

    def __init__(self, bus: EventBus) -> None:
        super().__init__()
        self._listeners = bus._listeners  # pyright: ignore[reportPrivateUsage]  # shared

    def emit(self, event: Event) -> None:
        for listener in tuple(self._listeners):
            try:
                listener(event)
            except Exception:  # contained, as the real bus does
                continue


class NestedEventsDeliveredAtOnce(Agent):
    """(A11) The agent's bus delivers an event emitted from a listener at once, inside the
    delivery of the event that listener was given: listeners after it see the two in the
    other order."""

    __slots__ = ()

    def __init__(self, *, events: EventBus | None = None, **kwargs: Any) -> None:
        super().__init__(events=_ReentrantBus(events or EventBus()), **kwargs)


class _RequestRebuilt:
    """The agent's model, given each request with its messages rebuilt by `messages` from
    the agent's session (the agent's request builder, with its mistake)."""

    def __init__(
        self, model: Model, session: Session, messages: Callable[[Session], Sequence[Message]]
    ) -> None:
        self._model, self._session, self._messages = model, session, messages

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        messages = self._messages(self._session)
        return self._model.stream(ModelRequest(messages, request.tools, request.options))


class RequestFromTurnSnapshot(Agent):
    """(A12) The model request is built from the history as it was when the turn started:
    later steps miss their own replies, tool results, steering and context."""

    __slots__ = ()

    def __init__(self, *, model: Model, session: Session, **kwargs: Any) -> None:
        snapshots: dict[int, Sequence[Message]] = {}

        def at_turn_start(session: Session) -> Sequence[Message]:
            turn = sum(1 for r in session.records if r.type == "turn/start")
            return snapshots.setdefault(turn, session.message_snapshot())

        model = _RequestRebuilt(model, session, at_turn_start)
        super().__init__(model=model, session=session, **kwargs)


class RequestSeesLaterRecords(Agent):
    """(A19) The model request holds the session's live list of messages instead of a
    frozen view: a model that keeps the request sees the replies, calls and results recorded
    after it was sent."""

    __slots__ = ()

    def __init__(self, *, model: Model, session: Session, **kwargs: Any) -> None:
        def live(session: Session) -> Sequence[Message]:
            return session._transcript.messages  # pyright: ignore[reportPrivateUsage]

        super().__init__(model=_RequestRebuilt(model, session, live), session=session, **kwargs)


class SystemContextAsUser(Agent):
    """(A12) Injected context loses its role: a system message reaches the model as user."""

    __slots__ = ()

    def _accept(
        self, verb: str, content: str, kind: MessageKind, *, system: bool = False
    ) -> InboxMessage:
        return super()._accept(verb, content, kind)  # pyright: ignore[reportPrivateUsage]


class _ToolCallsNotRecorded(_LossySession):
    """(A13) Tool calls run, but neither they nor their results are recorded."""

    __slots__ = ()

    def lost(self, type: str, data: Mapping[str, object]) -> bool:
        return type in ("tool/call", "tool/result")


class WaitIdleWithoutCheckpoint(Agent):
    """(A9) A fast path: `wait_idle` on an IDLE agent with nothing queued returns at once,
    without a checkpoint."""

    __slots__ = ()

    async def wait_idle(self) -> None:
        if self.status is AgentStatus.IDLE and not self.pending:
            return  # the seeded defect: no checkpoint
        await super().wait_idle()


wait_idle_without_checkpoint = factory_for(WaitIdleWithoutCheckpoint)
send_leaves_status_idle = factory_for(SendLeavesStatusIdle)
prompts_run_newest_first = factory_for(PromptsRunNewestFirst)
inject_wakes_idle_agent = factory_for(InjectWakesIdleAgent)
idle_cancel_strands_next_prompt = factory_for(IdleCancelStrandsNextPrompt)
cancel_clears_before_emitting = factory_for(CancelClearsBeforeEmitting)
close_overwrites_first_cause = factory_for(CloseOverwritesFirstCause)
partial_reply_dropped = factory_for(Agent, _PartialReplyDropped)
wait_idle_on_closed_returns_at_once = factory_for(WaitIdleOnClosedReturnsAtOnce)
inject_accepted_after_close = factory_for(InjectAcceptedAfterClose)
listener_error_escapes = factory_for(ListenerErrorEscapes)
nested_events_delivered_at_once = factory_for(NestedEventsDeliveredAtOnce)
request_from_turn_snapshot = factory_for(RequestFromTurnSnapshot)
system_context_as_user = factory_for(SystemContextAsUser)
request_sees_later_records = factory_for(RequestSeesLaterRecords)
tool_calls_not_recorded = factory_for(Agent, _ToolCallsNotRecorded)

_record_reply = _step._record_reply  # pyright: ignore[reportPrivateUsage]


def _record_reply_running_cut_calls(
    parts: Any, text: str, calls: list[Any], finish: Any, unanswered: dict[int, Any]
) -> bool:
    """Records a reply as the built-in does, but runs its calls whatever its finish: the
    check of `length` was dropped."""
    if _record_reply(parts, text, calls, finish, unanswered) or not calls:
        return bool(unanswered)
    for index, call in enumerate(calls):
        data = {"call_id": call.call_id, "name": call.name, "arguments": call.arguments}
        parts.session.append("tool/call", data)
        unanswered[index] = call
    return True


def _patched_agent(
    target: object, name: str, value: object
) -> Callable[..., AbstractAsyncContextManager[Agent]]:
    """A built-in agent whose `target.name` is `value` while it is open."""

    def factory(
        model: Model,
        tools: Sequence[Tool],
        events: EventBus,
        options: AgentOptions,
        approval: Approval | None = None,
    ) -> AbstractAsyncContextManager[Agent]:
        @asynccontextmanager
        async def opened() -> AsyncGenerator[Agent]:
            with mock.patch.object(target, name, value):
                async with open_agent(
                    model, tools=tools, events=events, options=options, approval=approval
                ) as agent:
                    yield agent

        return opened()

    return factory


_Trace = _tracing._AgentTrace  # pyright: ignore[reportPrivateUsage]
_tool_result = _Trace._tool_result  # pyright: ignore[reportPrivateUsage]


def _no_span_unless_started(self: Any, data: Mapping[str, Any]) -> None:
    """(O1) A result whose call never started (rejected, or cut before it ran) makes no
    span: only the calls a ToolStarted opened are traced."""
    if str(data["call_id"]) in self._tools:
        _tool_result(self, data)


def _interrupted_left_open(self: Any, data: Mapping[str, Any]) -> None:
    """(O2) An interrupted call's span is dropped, not parked for the turn's end to close."""
    if data.get("interrupted"):
        self._tools.pop(str(data["call_id"]), None)
        return
    _tool_result(self, data)


# (O1) The step number goes into an attribute of the wrong name.
step_attribute_misnamed = _patched_agent(_tracing, "STEP", "trio_agents.step_number")
unstarted_call_has_no_span = _patched_agent(_Trace, "_tool_result", _no_span_unless_started)
interrupted_tool_span_left_open = _patched_agent(_Trace, "_tool_result", _interrupted_left_open)


# (A13) The calls of a reply cut at the token limit run, their arguments perhaps cut.
cut_reply_calls_run = _patched_agent(_step, "_record_reply", _record_reply_running_cut_calls)


# -- through the observer API: the defect is the adapter's, the agent under it is sound ------


def _observed_with(on_record: Any, on_event: Any, wrap: Any, *, fresh: bool = False) -> Any:
    """An observed adapter relaying with `on_record` (with `fresh`, a class: one instance
    per agent, for an adapter that keeps state) and `on_event`, yielding `wrap(agent)`."""

    @asynccontextmanager
    async def adapter(
        model: Model, tools: Sequence[Tool], observer: AgentObserver, options: AgentOptions
    ) -> AsyncGenerator[Any, None]:
        relay = on_record() if fresh else on_record
        session = Session(observer.agent_id)
        session.observe(lambda record: relay(observer, record))
        bus = EventBus()
        bus.connect(lambda event: on_event(observer, event))
        async with open_agent(
            model, tools=tools, options=options, session=session, events=bus
        ) as agent:
            yield wrap(agent, observer)

    return observed(adapter)


def _skip_tool_results(observer: AgentObserver, record: Record) -> None:
    if record.type == "tool/result" and not record.data.get("interrupted"):
        return  # the adapter never calls tool_answered
    relay_record(observer, record)


def _relay_all_but_cancels(observer: AgentObserver, event: Event) -> None:
    if not isinstance(event, CancelRequested):
        relay_event(observer, event)


class _AnnouncesCancelAfterClearing(ObservedTrioAgent):
    """Calls cancel_requested once the agent's cancel has returned, i.e. after clearing."""

    def __init__(self, agent: Agent, observer: AgentObserver) -> None:
        super().__init__(agent)
        self._observer = observer

    def cancel(self, reason: str, *, cause: CancelCause) -> bool:
        effective = super().cancel(reason, cause=cause)
        if effective:
            self._observer.cancel_requested(cause, reason)
        return effective


def _plain(agent: Agent, _: AgentObserver) -> ObservedTrioAgent:
    return ObservedTrioAgent(agent)


class _UsageOfTheLastReport:
    """Relays every record, but an assistant/message with the usage the model last
    reported, in this reply or an earlier one: the adapter keeps a variable it never
    clears."""

    def __init__(self) -> None:
        self.last: Usage | None = None

    def __call__(self, observer: AgentObserver, record: Record) -> None:
        if record.type != "assistant/message" or record.data.get("interrupted"):
            relay_record(observer, record)
            return
        tokens = record.data.get("usage")
        if isinstance(tokens, Mapping):
            self.last = Usage(int(tokens["input_tokens"]), int(tokens["output_tokens"]))  # pyright: ignore[reportUnknownArgumentType]
        observer.reply_ended(finish=record.data.get("finish", "stop"), usage=self.last)


observer_tool_result_missing = _observed_with(_skip_tool_results, relay_event, _plain)
# (A13) A reply that reported no usage is recorded with the usage of an earlier one.
observer_usage_of_the_last_report = _observed_with(
    _UsageOfTheLastReport, relay_event, _plain, fresh=True
)
observer_cancel_after_clearing = _observed_with(
    relay_record, _relay_all_but_cancels, _AnnouncesCancelAfterClearing
)


SEEDED = (
    Seeded(
        "a-queued-prompt-batched",
        queued_prompt_batched_into_cancelled_turn,
        "agent",
        "cancelled-prompt-never-runs",
    ),
    Seeded("b-idle-cancel-emits", idle_cancel_emits, "agent", "idle-cancel-inert"),
    Seeded(
        "e-wait-idle-at-turn-boundary", wait_idle_at_turn_boundary, "agent", "wait-idle-returns"
    ),
    Seeded(
        "f-steering-lost-at-turn-end", steering_lost_at_turn_end, "agent", "steering-never-lost"
    ),
    Seeded("h-tool-result-missing", tool_result_missing_after_cancel, "agent", "history-valid"),
    Seeded(
        "race-send-dropped-after-cancel",
        send_dropped_right_after_cancel,
        "agent",
        "send-after-cancel-runs",
    ),
    Seeded("send-leaves-status-idle", send_leaves_status_idle, "agent", "status-after-send"),
    Seeded(
        "wait-idle-without-checkpoint",
        wait_idle_without_checkpoint,
        "agent",
        "wait-idle-checkpoints",
    ),
    Seeded("prompts-run-newest-first", prompts_run_newest_first, "agent", "one-send-one-turn"),
    Seeded("inject-wakes-idle-agent", inject_wakes_idle_agent, "agent", "inject-never-wakes"),
    Seeded(
        "idle-cancel-strands-next-prompt",
        idle_cancel_strands_next_prompt,
        "agent",
        "idle-cancel-strands-nothing",
    ),
    Seeded("cancel-clears-before-emitting", cancel_clears_before_emitting, "agent", "cancel-order"),
    # Its turn ends as the close says, so the prompts the close drops may be seen first.
    Seeded(
        "close-overwrites-first-cause",
        close_overwrites_first_cause,
        "agent",
        "turn-end-reason",
        also=("stream-ends-with-turn-end",),
    ),
    Seeded("partial-reply-dropped", partial_reply_dropped, "agent", "partial-reply-kept"),
    Seeded(
        "wait-idle-on-closed-returns-at-once",
        wait_idle_on_closed_returns_at_once,
        "agent",
        "wait-idle-closed",
    ),
    Seeded("inject-accepted-after-close", inject_accepted_after_close, "agent", "closed-refuses"),
    Seeded("listener-error-escapes", listener_error_escapes, "agent", "listener-errors-contained"),
    Seeded(
        "nested-events-delivered-at-once",
        nested_events_delivered_at_once,
        "agent",
        "one-event-order",
    ),
    Seeded("request-from-turn-snapshot", request_from_turn_snapshot, "agent", "request-history"),
    Seeded("system-context-as-user", system_context_as_user, "agent", "request-history"),
    Seeded("request-sees-later-records", request_sees_later_records, "agent", "request-unchanged"),
    Seeded("tool-calls-not-recorded", tool_calls_not_recorded, "agent", "records-complete"),
    Seeded("cut-reply-calls-run", cut_reply_calls_run, "agent", "cut-reply-calls-not-run"),
    Seeded("step-attribute-misnamed", step_attribute_misnamed, "agent", "spans-mirror-records"),
    # A span that is not there may never have begun or never have ended: either rule.
    Seeded(
        "unstarted-call-has-no-span",
        unstarted_call_has_no_span,
        "agent",
        "spans-mirror-records",
        also=("spans-end-with-turn",),
    ),
    Seeded(
        "interrupted-tool-span-left-open",
        interrupted_tool_span_left_open,
        "agent",
        "spans-end-with-turn",
    ),
    Seeded("observer-tool-result-missing", observer_tool_result_missing, "agent", "history-valid"),
    Seeded(
        "observer-usage-of-the-last-report",
        observer_usage_of_the_last_report,
        "agent",
        "records-complete",
    ),
    Seeded(
        "observer-cancel-after-clearing", observer_cancel_after_clearing, "agent", "cancel-order"
    ),
)
