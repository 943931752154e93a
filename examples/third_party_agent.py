"""An agent built outside trio-agents' registry, checked by the conformance suite.

`WrappedAgent` is a thin wrapper of the kind an application writes: it logs every call and
delegates to an `Agent` whose loop it runs in a nursery of its own (no runtime, no registry,
no store). The suite only sees the public surface, so it checks the wrapper as it would any
implementation:

    trio-agents conformance --target examples.third_party_agent:factory
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager

import trio

from trio_agents import (
    Agent,
    AgentOptions,
    AgentStatus,
    CancelCause,
    EventBus,
    Message,
    MessageId,
    Model,
    Session,
    Tool,
)

logger = logging.getLogger("examples.third_party_agent")


class WrappedAgent:
    """Logs every call, then delegates."""

    def __init__(self, inner: Agent) -> None:
        self._inner = inner

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def session(self) -> Session:
        return self._inner.session

    @property
    def status(self) -> AgentStatus:
        return self._inner.status

    def send(self, content: str) -> MessageId:
        logger.info("send %r", content)
        return self._inner.send(content)

    def steer(self, content: str) -> MessageId:
        logger.info("steer %r", content)
        return self._inner.steer(content)

    def inject(self, message: Message | str) -> MessageId:
        logger.info("inject %r", message)
        return self._inner.inject(message)

    def cancel(self, reason: str = "cancelled", *, cause: CancelCause = "user") -> bool:
        logger.info("cancel %r (%s)", reason, cause)
        return self._inner.cancel(reason, cause=cause)

    async def wait_idle(self) -> None:
        await self._inner.wait_idle()


@asynccontextmanager
async def factory(
    model: Model, tools: Sequence[Tool], events: EventBus, options: AgentOptions
) -> AsyncGenerator[WrappedAgent, None]:
    """The conformance factory: open an agent, yield it, close it on exit."""
    inner = Agent(
        session=Session("third-party"), model=model, tools=tools, options=options, events=events
    )
    async with trio.open_nursery() as nursery:
        close = await nursery.start(inner.run)
        try:
            yield WrappedAgent(inner)
        finally:
            await close()
