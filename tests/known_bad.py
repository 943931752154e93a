"""Known-bad agents: each is the real agent with one seeded defect. The conformance suite
must fail on every one of them (see tests/test_known_bad.py)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager

import trio

from trio_agents import Agent, AgentOptions, CancelCause, EventBus, Model, Session, Tool


class SteeringLostAtTurnEnd(Agent):
    """(f) Steering a turn did not consume is silently dropped when the turn ends."""

    __slots__ = ()

    async def _run_turn(self, prompt):  # type: ignore[no-untyped-def] # pyright: ignore
        await super()._run_turn(prompt)  # pyright: ignore[reportUnknownMemberType]
        self._inbox.discard_work()  # pyright: ignore[reportPrivateUsage]


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
