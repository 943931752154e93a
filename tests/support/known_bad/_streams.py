"""Known-bad turn streams: the real agent, whose `stream` returns a `TurnStream` with one
seeded defect (rules V1-V4)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from unittest import mock

import trio

from trio_agents import (
    Agent,
    AgentOptions,
    Event,
    EventBus,
    Model,
    Record,
    TextStreamed,
    Tool,
    TurnDropped,
    TurnEnd,
    TurnEvent,
    TurnResult,
    TurnText,
    Usage,
    open_agent,
    turn_result,
)
from trio_agents._agent import _turn_result
from trio_agents._agent._turn_stream import TurnStream

from ._agent import factory_for
from ._seeded import Seeded

# pyright: reportPrivateUsage=false


class _TextTwice(TurnStream):
    """A text event is handed out again before the next one: the buffer of the last piece
    taken is not cleared."""

    __slots__ = ("_again",)

    def __init__(self, agent: Agent, bus: EventBus, prompt: str) -> None:
        super().__init__(agent, bus, prompt)
        self._again: TurnEvent | None = None

    async def __anext__(self) -> TurnEvent:
        again, self._again = self._again, None
        if again is not None:
            await trio.lowlevel.checkpoint()
            return again
        event = await super().__anext__()
        if isinstance(event, TurnText):
            self._again = event
        return event


class _NoTurnEnd(TurnStream):
    """Iteration stops when the turn ends: its `TurnEnd` is never handed out (the turn is
    over anyway)."""

    __slots__ = ()

    async def __anext__(self) -> TurnEvent:
        event = await super().__anext__()
        if isinstance(event, TurnEnd):
            raise StopAsyncIteration
        return event


class _GoesOnAfterTurnEnd(TurnStream):
    """After handing out `TurnEnd` the iteration goes on waiting for more, for good."""

    __slots__ = ("_ended",)

    def __init__(self, agent: Agent, bus: EventBus, prompt: str) -> None:
        super().__init__(agent, bus, prompt)
        self._ended = False

    async def __anext__(self) -> TurnEvent:
        if self._ended:
            await trio.sleep_forever()
        event = await super().__anext__()
        self._ended = isinstance(event, TurnEnd)
        return event


class _FollowsFromFirstRead(TurnStream):
    """Subscribes lazily: a reader that first reads after the turn has begun to record
    misses what came before its first read (the first event is lost)."""

    __slots__ = ("_entered", "_first")

    def __init__(self, agent: Agent, bus: EventBus, prompt: str) -> None:
        super().__init__(agent, bus, prompt)
        self._entered = 0
        self._first = True

    async def __aenter__(self) -> TurnStream:
        self._entered = len(self._agent.session)
        return await super().__aenter__()

    async def __anext__(self) -> TurnEvent:
        late = self._first and len(self._agent.session) > self._entered
        self._first = False
        event = await super().__anext__()
        if late and not isinstance(event, TurnEnd | TurnDropped):
            event = await super().__anext__()  # what came before the first read is gone
        return event


class _ResultOfLatestTurn(TurnStream):
    """`result()` reads the session's latest finished turn, not its prompt's."""

    __slots__ = ()

    async def result(self) -> TurnResult:
        await super().result()
        records = self._agent.session.records
        last = max(int(r.data["turn"]) for r in records if r.type == "turn/end")
        return turn_result(records, last)


class _UsageZeroByDefault(TurnStream):
    """`result()` gives a zero `Usage` for a turn no reply of which reported one (a default
    that reads as "nothing was used"), where the contract says None."""

    __slots__ = ()

    async def result(self) -> TurnResult:
        got = await super().result()
        return got if got.usage is not None else dataclasses.replace(got, usage=Usage())


class _AnyAgentsBus(EventBus):
    """The bus a stream follows, as the stream sees it: streamed text is taken by its turn
    number alone, so another agent's turn of the same number streams into this one."""

    def __init__(self, bus: EventBus, agent_id: str) -> None:
        super().__init__()
        self._bus = bus
        self._agent_id = agent_id

    def connect(self, listener: Callable[[Event], object]) -> Callable[[], None]:
        def relabelled(event: Event) -> object:
            if isinstance(event, TextStreamed):
                event = dataclasses.replace(event, agent_id=self._agent_id)
            return listener(event)

        return self._bus.connect(relabelled)


class _AnyAgentsText(TurnStream):
    """A stream of the agent's turn over `_AnyAgentsBus`."""

    __slots__ = ()

    def __init__(self, agent: Agent, bus: EventBus, prompt: str) -> None:
        super().__init__(agent, _AnyAgentsBus(bus, agent.id), prompt)


def _agent_with(stream: type[TurnStream]) -> type[Agent]:
    class _Streaming(Agent):
        __slots__ = ()

        def stream(self, content: str) -> TurnStream:
            return stream(self, self._events, content)

    _Streaming.__name__ = stream.__name__
    return _Streaming


_result = _turn_result._result  # pyright: ignore[reportPrivateUsage]


def _last_reply_usage(records: Sequence[Record]) -> TurnResult:
    got = _result(records)
    last = [
        r.data["usage"] for r in records if r.type == "assistant/message" and r.data.get("usage")
    ]
    if got.usage is None or not last:
        return got
    # The mistake: the input tokens of the last reply, not the sum of the turn's.
    return dataclasses.replace(
        got, usage=dataclasses.replace(got.usage, input_tokens=int(last[-1]["input_tokens"]))
    )


@asynccontextmanager
async def usage_of_last_reply(
    model: Model, tools: Sequence[Tool], events: EventBus, options: AgentOptions
) -> AsyncGenerator[Any]:
    """`turn_result` (which `TurnStream.result()` gives too) takes a turn's input tokens from
    its last reply instead of summing its replies'."""
    with mock.patch.object(_turn_result, "_result", _last_reply_usage):
        async with open_agent(model, tools=tools, events=events, options=options) as agent:
            yield agent


stream_text_twice = factory_for(_agent_with(_TextTwice))
stream_without_turn_end = factory_for(_agent_with(_NoTurnEnd))
stream_goes_on_after_turn_end = factory_for(_agent_with(_GoesOnAfterTurnEnd))
stream_follows_from_first_read = factory_for(_agent_with(_FollowsFromFirstRead))
stream_result_of_latest_turn = factory_for(_agent_with(_ResultOfLatestTurn))
stream_usage_zero_by_default = factory_for(_agent_with(_UsageZeroByDefault))
stream_takes_any_agents_text = factory_for(_agent_with(_AnyAgentsText))

SEEDED: tuple[Seeded, ...] = (
    Seeded("usage-of-last-reply", usage_of_last_reply, "agent", "stream-result-from-records"),
    Seeded(
        "stream-usage-zero-by-default",
        stream_usage_zero_by_default,
        "agent",
        "stream-result-from-records",
    ),
    Seeded("stream-text-twice", stream_text_twice, "agent", "stream-follows-its-turn"),
    Seeded(
        "stream-takes-any-agents-text",
        stream_takes_any_agents_text,
        "agent",
        "stream-follows-its-turn",
    ),
    Seeded(
        "stream-without-turn-end", stream_without_turn_end, "agent", "stream-ends-with-turn-end"
    ),
    Seeded(
        "stream-goes-on-after-turn-end",
        stream_goes_on_after_turn_end,
        "agent",
        "stream-ends-with-turn-end",
    ),
    Seeded(
        "stream-follows-from-first-read",
        stream_follows_from_first_read,
        "agent",
        "stream-slow-reader-loses-nothing",
    ),
    Seeded(
        "stream-result-of-latest-turn",
        stream_result_of_latest_turn,
        "agent",
        "stream-result-from-records",
    ),
)
