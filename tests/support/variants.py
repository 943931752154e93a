"""Agents that lack a feature or chose the other design, each declaring it as a target would:
the built-in `Agent` with one thing taken away or done the other sound way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from agent_conformance import Features
from trio_agents import (
    Agent,
    AgentOptions,
    Approval,
    EventBus,
    MessageId,
    Model,
    Record,
    Tool,
    open_agent,
)
from trio_agents._agent._turn import CLOSED_CAUSE, StepAborted, Turn
from trio_agents._store._records import TurnEndReason, aborted, completed, max_steps


class NoSteer(Agent):
    """An agent without `steer`: calling it is an error."""

    __slots__ = ()

    def steer(self, content: str) -> MessageId:
        raise NotImplementedError("this agent cannot steer")


class OtherDesigns(Agent):
    """Steering left at the step limit is answered by one more step (D91), and a cancel
    after the final answer lets the answer stand: the turn ends completed (D92)."""

    __slots__ = ("_steering_at_step_end",)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._steering_at_step_end = False
        self.session.observe(self._at_step_end)

    def _at_step_end(self, record: Record) -> None:
        if record.type == "step/end":
            # Whether the answer is final is decided before a StepEnded listener may cancel
            # (the step's end is recorded just before it is announced).
            self._steering_at_step_end = self._inbox.has_steering

    async def _run_steps(self, turn: Turn) -> TurnEndReason:
        limit = self._options.max_steps
        step = 0
        while True:
            # One step beyond the limit, and only to answer steering.
            if (
                limit is not None
                and step >= limit
                and (step > limit or not self._inbox.has_steering)
            ):
                return max_steps()
            step += 1
            outcome = await self._run_step(turn, step)
            if isinstance(outcome, StepAborted):
                return aborted(outcome.reason, outcome.cause)
            if not outcome and not self._inbox.has_steering:
                if turn.cause != CLOSED_CAUSE and not self._steering_at_step_end:
                    # A cancel since the step's last checkpoint came after the final answer:
                    # the answer stands.
                    turn.reason = turn.cause = None
                return completed()


Factory = Callable[
    [Model, Sequence[Tool], EventBus, AgentOptions], AbstractAsyncContextManager[Agent]
]


def factory_for(cls: type[Agent], features: Features | None) -> Factory:
    def factory(
        model: Model,
        tools: Sequence[Tool],
        events: EventBus,
        options: AgentOptions,
        approval: Approval | None = None,
    ) -> AbstractAsyncContextManager[Agent]:
        return open_agent(
            model,
            tools=tools,
            events=events,
            options=options,
            session="v",
            agent_class=cls,
            approval=approval,
        )

    factory.__name__ = cls.__name__
    if features is not None:
        factory.conformance_features = features  # type: ignore[attr-defined]
    return factory


no_steer = factory_for(NoSteer, Features(steer=False))
no_steer_undeclared = factory_for(NoSteer, None)
other_designs = factory_for(
    OtherDesigns,
    Features(steering_at_step_limit="answer", cancel_after_final_answer="completed"),
)
other_designs_undeclared = factory_for(OtherDesigns, None)
no_max_steps = factory_for(Agent, Features(max_steps=False))
bad_declaration = factory_for(Agent, None)
bad_declaration.conformance_features = {"steer": False}  # type: ignore[attr-defined]
bad_declaration.__name__ = "bad_declaration"
