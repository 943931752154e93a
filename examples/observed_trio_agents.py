"""trio-agents' own `Agent`, checked through the observer API as any other framework is.

The adapter uses only the `Agent`'s public surface: it yields the five calls (and
`pending`), and tells the suite's `AgentObserver` what happened, translating the agent's
records (`Session.observe`) and three of its events as they happen. Everything else, the
records the suite checks, the events its listeners see, the status, is the observer's.

    trio-agents conformance --target examples.observed_trio_agents:factory

A framework with its own loop calls the same instants from that loop instead: see
`examples/observed_loop.py`, and docs/conformance.md, "Checking an agent the suite does not
own".
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager

from agent_conformance import AgentObserver, observed
from trio_agents import (
    Agent,
    AgentOptions,
    CancelCause,
    CancelRequested,
    Event,
    EventBus,
    Message,
    Model,
    Record,
    Session,
    StatusChanged,
    TextStreamed,
    Tool,
    Usage,
    open_agent,
)


class ObservedTrioAgent:
    """The `ObservedAgent`: the agent's calls, nothing of its state."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    @property
    def pending(self) -> tuple[tuple[str, str], ...]:
        return self._agent.pending

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


def relay_record(observer: AgentObserver, record: Record) -> None:
    """One record of the agent's session, as the instant it stands for."""
    data = record.to_json()["data"]  # plain dicts and lists, the observer's to keep
    match record.type:
        case "user/message":  # its turn/start came just before: the turn has started
            observer.turn_started(data["id"], data["content"])
        case "steering/message":
            observer.message_claimed(data["id"], "steering", data["content"])
        case "context/message":
            role = data.get("role", "user")
            observer.message_claimed(data["id"], "context", data["content"], role=role)
        case "step/start":
            observer.step_started()
        case "assistant/message":
            interrupted = bool(data.get("interrupted"))
            tokens = data.get("usage")
            usage = Usage(tokens["input_tokens"], tokens["output_tokens"]) if tokens else None
            finish = data.get("finish", "stop")
            observer.reply_ended(finish=finish, interrupted=interrupted, usage=usage)
        case "tool/call":
            observer.tool_called(data["call_id"], data["name"], data["arguments"])
        case "tool/result" if data.get("interrupted"):
            observer.tool_interrupted(data["call_id"], content=data["content"])
        case "tool/result":
            observer.tool_answered(data["call_id"], data["content"], is_error=data["is_error"])
        case "step/end":
            observer.step_ended()
        case "turn/end":
            observer.turn_ended(data["reason"])
        case _:
            pass  # turn/start: announced with its prompt, by the user/message that follows


def relay_event(observer: AgentObserver, event: Event) -> None:
    """The events that carry what the records do not: status, cancels, streamed text. The
    rest (TurnStarted, StepStarted, ...) the observer emits itself, from the records."""
    if isinstance(event, StatusChanged):
        observer.status_changed(event.status)
    elif isinstance(event, CancelRequested):  # emitted before the agent clears anything
        observer.cancel_requested(event.cause, event.reason)
    elif isinstance(event, TextStreamed):
        observer.text_streamed(event.text)


@asynccontextmanager
async def open_observed(
    model: Model, tools: Sequence[Tool], observer: AgentObserver, options: AgentOptions
) -> AsyncGenerator[ObservedTrioAgent, None]:
    """The adapter's factory: an agent whose records and events reach `observer`."""
    session = Session(observer.agent_id)
    session.observe(lambda record: relay_record(observer, record))
    bus = EventBus()  # the agent's own bus: the suite's listeners hear the observer's
    bus.connect(lambda event: relay_event(observer, event))
    async with open_agent(
        model, tools=tools, options=options, session=session, events=bus
    ) as agent:
        yield ObservedTrioAgent(agent)


factory = observed(open_observed)
"""What `--target examples.observed_trio_agents:factory` names: an `AgentFactory`."""
