"""Live events and the bus that delivers them. Pure; no trio import.

Listeners are synchronous and are observers: a listener that raises is logged and skipped, so
it can never break a turn, a cancel or a close (rule A11). Delivery is synchronous, in
connection order, inside the call that caused the event; a listener may call back into the
agent (send, cancel) and the agent is in a consistent state when it does.

Delivery is not re-entrant: an event emitted while another is being delivered (a listener
that sends, say) is queued and delivered once the current event has reached every listener.
So every listener sees the same events in the same order, the order they happened in.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._status import AgentStatus

__all__ = [
    "AgentClosed",
    "AgentCreated",
    "CancelRequested",
    "Event",
    "EventBus",
    "Listener",
    "SessionClosed",
    "SessionCreated",
    "StatusChanged",
    "StepEnded",
    "StepStarted",
    "TextStreamed",
    "ToolStarted",
    "TurnEnded",
    "TurnStarted",
]

logger = logging.getLogger("trio_agents.events")


@dataclass(frozen=True, slots=True)
class StatusChanged:
    """An agent's status changed.

    agent_id: the agent's id.
    status: its new status.
    """

    agent_id: str
    status: AgentStatus


@dataclass(frozen=True, slots=True)
class CancelRequested:
    """An effective `Agent.cancel`, emitted before it clears the queue and cancels the turn.

    agent_id: the agent's id.
    cause: `"user"` or `"parent"`, as given to `cancel`.
    reason: the reason given to `cancel`.
    """

    agent_id: str
    cause: str
    reason: str


@dataclass(frozen=True, slots=True)
class AgentCreated:
    """The registry published an agent, right after its `SessionCreated`.

    agent_id: the agent's id.
    """

    agent_id: str


@dataclass(frozen=True, slots=True)
class AgentClosed:
    """The registry unregistered a closing agent; its `SessionClosed` follows.

    agent_id: the agent's id.
    """

    agent_id: str


@dataclass(frozen=True, slots=True)
class SessionCreated:
    """A session went live in the runtime's store as its agent was published.

    session_id: the session's id.
    """

    session_id: str


@dataclass(frozen=True, slots=True)
class SessionClosed:
    """A closing agent's session detached from the store's live set: its id may go live
    again.

    session_id: the session's id.
    """

    session_id: str


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """A turn began: its `turn/start` and `user/message` are recorded.

    agent_id: the agent's id.
    turn: the turn's number.
    """

    agent_id: str
    turn: int


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """A turn ended: its `turn/end` is recorded.

    agent_id: the agent's id.
    turn: the turn's number.
    reason: the `turn/end` reason, e.g. `{"kind": "completed"}`.
    """

    agent_id: str
    turn: int
    reason: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class StepStarted:
    """A step began: its `step/start` is recorded, and no model call has started yet.

    agent_id: the agent's id.
    turn: the turn's number.
    step: the step's number within the turn.
    """

    agent_id: str
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class StepEnded:
    """A step ended: its `step/end` is recorded.

    agent_id: the agent's id.
    turn: the turn's number.
    step: the step's number within the turn.
    """

    agent_id: str
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class TextStreamed:
    """A piece of assistant text as it streams, before the step records the whole message.

    agent_id: the agent's id.
    turn: the turn's number.
    step: the step's number within the turn.
    text: the piece, never empty.
    """

    agent_id: str
    turn: int
    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool call is about to run: its `tool/call` is committed and, if its agent asks
    before acting, it was allowed. An editor shows the call `in_progress` from here.

    agent_id: the agent's id.
    turn: the turn's number.
    step: the step's number within the turn.
    call_id: the call's id, as in its `tool/call` record.
    tool: the tool's name.
    """

    agent_id: str
    turn: int
    step: int
    call_id: str
    tool: str


Event = (
    StatusChanged
    | CancelRequested
    | AgentCreated
    | AgentClosed
    | SessionCreated
    | SessionClosed
    | TurnStarted
    | TurnEnded
    | StepStarted
    | StepEnded
    | TextStreamed
    | ToolStarted
)
"""Every event an `EventBus` delivers."""
Listener = Callable[[Event], object]
"""A synchronous callable that `EventBus.connect` delivers events to; its return value is
ignored, and an exception it raises is logged and skipped."""


class EventBus:
    """Synchronous fan-out of events to listeners, each failure contained and logged."""

    __slots__ = ("_delivering", "_listeners", "_queue")

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._queue: deque[Event] = deque()
        self._delivering = False

    def connect(self, listener: Listener) -> Callable[[], None]:
        """Deliver every later event to `listener`; returns a function that disconnects it."""
        self._listeners.append(listener)

        def disconnect() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return disconnect

    def emit(self, event: Event) -> None:
        """Deliver `event` to every listener, in connection order, before returning. An
        Exception a listener raises is logged and skipped. Never blocks.

        Called from a listener, it queues `event` and returns at once: the event is
        delivered once the current one has reached every listener.
        """
        self._queue.append(event)
        if self._delivering:
            return  # delivered by the emit already under way, after the current event
        self._delivering = True
        try:
            while self._queue:
                current = self._queue.popleft()
                # A copy: a listener may connect or disconnect others while we deliver.
                for listener in tuple(self._listeners):
                    try:
                        listener(current)
                    except Exception:
                        logger.exception(
                            "event listener %r raised on %r; ignored", listener, current
                        )
        finally:
            self._delivering = False
