"""Known-bad agents: each is the real agent with one seeded defect."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from trio_agents import (
    Agent,
    AgentOptions,
    CancelCause,
    EventBus,
    MessageId,
    Model,
    Record,
    Tool,
    open_agent,
)
from trio_agents._inbox import Inbox, InboxMessage

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


def factory_for(cls: type[Agent]):  # type: ignore[no-untyped-def] # pyright: ignore
    def factory(
        model: Model, tools: Sequence[Tool], events: EventBus, options: AgentOptions
    ) -> AbstractAsyncContextManager[Agent]:
        return open_agent(
            model, tools=tools, events=events, options=options, session="bad", agent_class=cls
        )

    factory.__name__ = cls.__name__
    return factory


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

    async def _run_turn(self, prompt: InboxMessage) -> None:
        await super()._run_turn(prompt)  # pyright: ignore[reportPrivateUsage]
        self._settled.unpark_all()  # pyright: ignore[reportPrivateUsage]  # wakes waiters early


class ToolResultMissingAfterCancel(Agent):
    """(h) A cancelled turn records no result for the tool calls it interrupted."""

    __slots__ = ()

    def _append(self, type: str, data: Mapping[str, object]) -> Record:
        if type == "tool/result" and data.get("interrupted"):
            return Record.of(type, data)  # dropped: never reaches the session
        return super()._append(type, data)


queued_prompt_batched_into_cancelled_turn = factory_for(QueuedPromptBatchedIntoCancelledTurn)
wait_idle_at_turn_boundary = factory_for(WaitIdleAtTurnBoundary)
tool_result_missing_after_cancel = factory_for(ToolResultMissingAfterCancel)


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


SEEDED = (
    Seeded("a-queued-prompt-batched", queued_prompt_batched_into_cancelled_turn, "agent", "?"),
    Seeded("b-idle-cancel-emits", idle_cancel_emits, "agent", "?"),
    Seeded("e-wait-idle-at-turn-boundary", wait_idle_at_turn_boundary, "agent", "?"),
    Seeded("f-steering-lost-at-turn-end", steering_lost_at_turn_end, "agent", "?"),
    Seeded("h-tool-result-missing", tool_result_missing_after_cancel, "agent", "?"),
)
