"""Implementations with a bug that crashes them (not a broken rule): the suite must report
the crash as itself, with its own traceback."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

from trio_agents import Agent, AgentOptions, EventBus, Model, Tool, open_agent


class _LoopCrashesWhenIdle(Agent):
    """The loop's settle looks up a table that is never filled: the first time the agent
    goes idle after a turn, the loop dies with a KeyError."""

    __slots__ = ()

    def _settle(self) -> None:
        if len(self.session):
            registry: dict[str, int] = {}
            registry[self.id] += 1  # the bug
        super()._settle()  # pyright: ignore[reportPrivateUsage]


def agent_whose_loop_crashes(
    model: Model, tools: Sequence[Tool], events: EventBus, options: AgentOptions
) -> AbstractAsyncContextManager[Agent]:
    return open_agent(
        model, tools=tools, events=events, options=options, agent_class=_LoopCrashesWhenIdle
    )
