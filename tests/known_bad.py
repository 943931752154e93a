"""Known-bad agents: each is the real agent with one seeded defect. The conformance suite
must fail on every one of them (see tests/test_known_bad.py)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from trio_agents import Agent, AgentOptions, CancelCause, EventBus, Model, Session, Tool
from trio_agents.inbox import Inbox, InboxMessage


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


def factory_for(cls: type[Agent]):  # type: ignore[no-untyped-def] # pyright: ignore
    @asynccontextmanager
    async def factory(
        model: Model, tools: Sequence[Tool], events: EventBus, options: AgentOptions
    ) -> AsyncGenerator[Agent, None]:
        agent = cls(
            session=Session("bad"), model=model, tools=tools, options=options, events=events
        )
        async with trio.open_nursery() as nursery:
            close = await nursery.start(agent.run)
            try:
                yield agent
            finally:
                await close()

    factory.__name__ = cls.__name__
    return factory


steering_lost_at_turn_end = factory_for(SteeringLostAtTurnEnd)
idle_cancel_emits = factory_for(IdleCancelEmits)
