"""The observer API: how an agent the suite does not own is checked (design D86-D89).

An adapter of a foreign agent framework does not rebuild trio-agents' records, events and
status. It tells an `AgentObserver` what happened, at the instants docs/conformance.md lists
("Checking an agent the suite does not own"), and the observer builds the records and emits
the events the agent machine checks. `observed(factory)` turns the adapter's factory into
the `AgentFactory` the machine and `agent-conformance --target` take.

Pure: no trio, no Hypothesis. Every instant is a synchronous call that never blocks.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Protocol, cast, runtime_checkable

from trio_agents import (
    AgentOptions,
    AgentStatus,
    CancelRequested,
    EventBus,
    Message,
    Model,
    ObserverMisuse,
    Record,
    StatusChanged,
    StepEnded,
    StepStarted,
    TextStreamed,
    Tool,
    TurnEnded,
    TurnStarted,
    Usage,
)

from ._vocabulary import (
    ASSISTANT_MESSAGE,
    CONTEXT_MESSAGE,
    STEERING_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    is_turn_end_reason,
)

if TYPE_CHECKING:
    from trio_agents import CancelCause

    from ._targets import AgentFactory, AgentSurface

__all__ = ["AgentObserver", "ObservedAgent", "ObservedFactory", "observed"]

_STATUSES = {s.value: s for s in AgentStatus}
_FINISHES = ("stop", "tool_calls", "length")


class AgentObserver:
    """What the adapter tells the suite, at the instants docs/conformance.md lists; the
    suite builds the agent's records and events from it.

    Built by the suite over the `EventBus` the agent machine listens on. Each instant
    appends its records, then emits its event, synchronously, before it returns: a listener
    that cancels does so inside the adapter's call (the adapter's own `cancel` runs
    re-entrantly there), so the adapter must be consistent when it calls an instant and look
    again whether it was cancelled when the call returns. A call out of order raises
    `ObserverMisuse`; the observer keeps it, and `records` and `status` raise it again, so
    an adapter that swallowed it (in a framework's callback, say) still fails the run.

    agent_id: the id every event carries (and the surface's `id`).
    records: every record so far, oldest first (a copy).
    status: the status the adapter last announced; IDLE until it announces another.
    """

    __slots__ = (
        "_calls",
        "_events",
        "_misuse",
        "_records",
        "_replied",
        "_status",
        "_step",
        "_steps",
        "_text",
        "_turn",
        "_turns",
        "agent_id",
    )

    def __init__(self, events: EventBus, *, agent_id: str = "observed") -> None:
        self.agent_id = agent_id
        self._events = events
        self._records: list[Record] = []
        self._status = AgentStatus.IDLE
        self._turns = 0
        self._turn: int | None = None  # the open turn's number
        self._step: int | None = None  # the open step's number
        self._steps = 0  # steps the open turn has started
        self._text: list[str] = []  # the open step's streamed reply
        self._replied = False  # the open step's reply has ended
        self._calls: dict[str, str] = {}  # the open step's tool calls: call id -> tool name
        self._misuse: ObserverMisuse | None = None

    @property
    def records(self) -> Sequence[Record]:
        """Every record so far, oldest first (a copy)."""
        self._raise_kept()
        return tuple(self._records)

    @property
    def status(self) -> AgentStatus:
        """The status last given to `status_changed` (IDLE before any)."""
        self._raise_kept()
        return self._status

    # -- the instants ------------------------------------------------------------------

    def status_changed(self, status: AgentStatus | Literal["idle", "running", "closed"]) -> None:
        """The agent's status is now `status`: emits StatusChanged, unless it already was
        (so an adapter may announce a status it is not sure changed)."""
        new = status if isinstance(status, AgentStatus) else _STATUSES.get(status)
        if new is None:
            self._misused(
                f"status_changed({status!r}): give an AgentStatus or 'idle', 'running', 'closed'"
            )
        if new is not self._status:
            self._status = new
            self._events.emit(StatusChanged(self.agent_id, new))

    def cancel_requested(self, cause: str, reason: str) -> None:
        """An effective cancel, before it clears anything (A6): emits CancelRequested."""
        if cause not in ("user", "parent"):
            self._misused(f"cancel_requested({cause!r}, ...): the cause is 'user' or 'parent'")
        self._events.emit(CancelRequested(self.agent_id, cause, reason))

    def turn_started(self, prompt_id: str, content: str) -> None:
        """A turn took the prompt `prompt_id`: records turn/start and its user/message, then
        emits TurnStarted."""
        if self._turn is not None:
            self._misused(
                f"turn_started({prompt_id!r}) while turn {self._turn} is open: "
                "call turn_ended first"
            )
        self._turns += 1
        self._turn = self._turns
        self._steps = 0
        self._append(TURN_START, {"turn": self._turn})
        self._append(USER_MESSAGE, {"id": prompt_id, "content": content})
        self._events.emit(TurnStarted(self.agent_id, self._turn))

    def message_claimed(
        self,
        message_id: str,
        kind: Literal["steering", "context"],
        content: str,
        *,
        role: Literal["user", "system"] = "user",
    ) -> None:
        """The next step took steering or context: records it (context injected as a system
        message with `role: "system"`). Call it before that step's `step_started`."""
        where = f"message_claimed({message_id!r}, {kind!r})"
        if kind not in ("steering", "context"):
            self._misused(f"{where}: the kind is 'steering' or 'context'")
        if role not in ("user", "system") or (role == "system" and kind != "context"):
            self._misused(f"{where}: role {role!r} is 'user', or 'system' for context only")
        turn = self._need_turn(where)
        if self._step is not None:
            self._misused(
                f"{where} inside step {self._step} of turn {turn}: claim a step's messages "
                "before its step_started (call step_ended first)"
            )
        data: dict[str, object] = {"id": message_id, "content": content}
        if role == "system":
            data["role"] = "system"
        self._append(STEERING_MESSAGE if kind == "steering" else CONTEXT_MESSAGE, data)

    def step_started(self) -> None:
        """A step begins, before its model call: records step/start, emits StepStarted."""
        turn = self._need_turn("step_started()")
        if self._step is not None:
            self._misused(f"step_started() while step {self._step} is open: call step_ended first")
        self._steps += 1
        self._step = self._steps
        self._text, self._replied, self._calls = [], False, {}
        self._append(STEP_START, {"turn": turn, "step": self._step})
        self._events.emit(StepStarted(self.agent_id, turn, self._step))

    def text_streamed(self, text: str) -> None:
        """A piece of the reply streamed: emits TextStreamed (nothing for ""), and keeps it
        for the reply's assistant/message."""
        turn, step = self._need_step("text_streamed()")
        if self._replied:
            self._misused("text_streamed() after reply_ended: the step's reply has ended")
        if text:
            self._text.append(text)
            self._events.emit(TextStreamed(self.agent_id, turn, step, text))

    def reply_ended(
        self,
        *,
        finish: Literal["stop", "tool_calls", "length"] = "stop",
        interrupted: bool = False,
        usage: Usage | None = None,
    ) -> None:
        """The model's reply ended: records the assistant/message with the text streamed,
        `finish` and the `usage` the model reported, if any; `interrupted=True` for a reply
        cut short, which records the text so far with `interrupted: true` (nothing, when
        nothing streamed)."""
        self._need_step("reply_ended()")
        if self._replied:
            self._misused("reply_ended() twice in one step: a step has one reply")
        if finish not in _FINISHES:
            self._misused(f"reply_ended(finish={finish!r}): finish is one of {_FINISHES}")
        self._replied = True
        content = "".join(self._text)
        if not interrupted:
            data: dict[str, Any] = {"content": content, "finish": finish}
            if usage is not None:
                data["usage"] = {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                }
            self._append(ASSISTANT_MESSAGE, data)
        elif content:
            self._append(ASSISTANT_MESSAGE, {"content": content, "interrupted": True})

    def tool_called(self, call_id: str, name: str, arguments: Mapping[str, Any]) -> None:
        """The reply asked for a tool call, about to run: records tool/call. Call it after
        reply_ended, once per call."""
        self._need_step(f"tool_called({call_id!r})")
        if not self._replied:
            self._misused(f"tool_called({call_id!r}) before reply_ended: end the reply first")
        self._calls[call_id] = name
        self._append(TOOL_CALL, {"call_id": call_id, "name": name, "arguments": arguments})

    def tool_answered(self, call_id: str, content: str, *, is_error: bool = False) -> None:
        """A tool call of this step returned (or failed, `is_error`): records tool/result."""
        self._need_call(f"tool_answered({call_id!r})", call_id)
        self._append(TOOL_RESULT, {"call_id": call_id, "content": content, "is_error": is_error})

    def tool_interrupted(self, call_id: str, *, content: str | None = None) -> None:
        """A tool call of this step did not end by itself (a cancel, a timeout): records its
        tool/result with `interrupted: true`. `content` is what the model will read of it;
        by default trio-agents' own sentence."""
        name = self._need_call(f"tool_interrupted({call_id!r})", call_id)
        text = (
            content
            if content is not None
            else f"tool call {name!r} was interrupted before it finished"
        )
        data = {"call_id": call_id, "content": text, "is_error": True, "interrupted": True}
        self._append(TOOL_RESULT, data)

    def step_ended(self) -> None:
        """The step ended, its tool calls answered: records step/end, emits StepEnded."""
        turn, step = self._need_step("step_ended()")
        self._step = None
        self._append(STEP_END, {"turn": turn, "step": step})
        self._events.emit(StepEnded(self.agent_id, turn, step))

    def turn_ended(self, reason: Mapping[str, Any]) -> None:
        """The turn ended with `reason`, a TurnEndReason mapping such as `{"kind":
        "aborted", "reason": r, "cause": c}`: records turn/end, emits TurnEnded."""
        turn = self._need_turn("turn_ended()")
        if self._step is not None:
            self._misused(f"turn_ended() while step {self._step} is open: call step_ended first")
        if not isinstance(reason, Mapping) or not is_turn_end_reason(reason):  # pyright: ignore[reportUnnecessaryIsInstance]
            self._misused(
                f"turn_ended({reason!r}): the reason is a TurnEndReason mapping, e.g. "
                "{'kind': 'completed'}"
            )
        self._turn = None
        record = self._append(TURN_END, {"turn": turn, "reason": reason})
        self._events.emit(TurnEnded(self.agent_id, turn, record.data["reason"]))

    # -- helpers -----------------------------------------------------------------------

    def _append(self, type: str, data: Mapping[str, Any]) -> Record:
        record = Record.of(type, data)
        self._records.append(record)
        return record

    def _need_turn(self, call: str) -> int:
        if self._turn is None:
            self._misused(f"{call} outside a turn: call turn_started first")
        return self._turn

    def _need_step(self, call: str) -> tuple[int, int]:
        turn = self._need_turn(call)
        if self._step is None:
            self._misused(f"{call} outside a step: call step_started first")
        return turn, self._step

    def _need_call(self, call: str, call_id: str) -> str:
        self._need_step(call)
        name = self._calls.get(call_id)
        if name is None:
            self._misused(
                f"{call}: this step has no such call; call tool_called({call_id!r}) first"
            )
        return name

    def _misused(self, message: str) -> NoReturn:
        misuse = ObserverMisuse(message)
        if self._misuse is None:
            self._misuse = misuse
        raise misuse

    def _raise_kept(self) -> None:
        if self._misuse is not None:
            raise self._misuse


@runtime_checkable
class ObservedAgent(Protocol):
    """What an adapter's factory yields: the agent's five calls, with the contract's
    semantics (A1-A10). No status, records or session: the suite takes those from the
    observer. An optional `pending` (a tuple of `(message id, kind)` pairs, accepted and
    not yet delivered, in order) is checked when present."""

    def send(self, content: str) -> str:
        """Queue a prompt and return its id; from IDLE, announce RUNNING before returning
        (A1). Never blocks."""
        ...

    def steer(self, content: str) -> str:
        """Steer the running turn's next step, or send when there is none (A3)."""
        ...

    def inject(self, message: Message | str, /) -> str:
        """Context for the next step; never starts a turn (A4)."""
        ...

    def cancel(self, reason: str, *, cause: CancelCause) -> bool:
        """Whether it was effective; an effective one calls `cancel_requested` before it
        clears anything (A5, A6)."""
        ...

    async def wait_idle(self) -> None:
        """Return once the agent settles, or its loop exited if closed (A9). Always a
        checkpoint."""
        ...


ObservedFactory = Callable[
    [Model, Sequence[Tool], AgentObserver, AgentOptions],
    AbstractAsyncContextManager[ObservedAgent],
]
"""An adapter's factory: `factory(model, tools, observer, options)` is an async context
manager yielding an `ObservedAgent` that reports to `observer`; leaving it closes the
agent."""


class _ObservedSession:
    """What the agent machine reads of a session: its id and records, from the observer."""

    __slots__ = ("_observer",)

    def __init__(self, observer: AgentObserver) -> None:
        self._observer = observer

    @property
    def id(self) -> str:
        return self._observer.agent_id

    @property
    def records(self) -> Sequence[Record]:
        return self._observer.records

    def __len__(self) -> int:
        return len(self._observer.records)


class _ObservedSurface:
    """The `AgentSurface` the machine drives: calls go to the adapter, state comes from the
    observer."""

    __slots__ = ("_agent", "_observer", "session")

    def __init__(self, agent: ObservedAgent, observer: AgentObserver) -> None:
        self._agent = agent
        self._observer = observer
        self.session = _ObservedSession(observer)

    @property
    def id(self) -> str:
        return self._observer.agent_id

    @property
    def status(self) -> AgentStatus:
        return self._observer.status

    @property
    def pending(self) -> object:
        # An AttributeError when the adapter has none: the machine then checks no pending.
        return cast("object", getattr(self._agent, "pending"))  # noqa: B009

    def send(self, content: str) -> str:
        return self._agent.send(content)

    def steer(self, content: str) -> str:
        return self._agent.steer(content)

    def inject(self, message: Message | str, /) -> str:
        return self._agent.inject(message)

    def cancel(self, reason: str, *, cause: CancelCause) -> bool:
        return self._agent.cancel(reason, cause=cause)

    async def wait_idle(self) -> None:
        await self._agent.wait_idle()


def observed(factory: ObservedFactory, *, agent_id: str = "observed") -> AgentFactory:
    """The `AgentFactory` that checks the adapter `factory`: each agent it opens gets an
    `AgentObserver` (with `agent_id`) over the machine's `EventBus`, and the machine reads
    its id, status and records from that observer. Assign the result to a module attribute
    to name it as `agent-conformance --target module:attribute`. A
    `conformance_features` declaration on `factory` is carried over to the result (or set it
    on the result)."""

    @asynccontextmanager
    async def open_observed(
        model: Model, tools: Sequence[Tool], events: EventBus, options: AgentOptions
    ) -> AsyncGenerator[AgentSurface, None]:
        observer = AgentObserver(events, agent_id=agent_id)
        async with factory(model, tools, observer, options) as agent:
            # Not a Session, but all the machine reads of one (its id and records).
            yield cast("AgentSurface", _ObservedSurface(agent, observer))

    open_observed.__name__ = f"observed({getattr(factory, '__name__', 'factory')})"
    open_observed.__qualname__ = open_observed.__name__
    declared = getattr(factory, "conformance_features", None)
    if declared is not None:
        open_observed.conformance_features = declared  # type: ignore[attr-defined]
    return open_observed
