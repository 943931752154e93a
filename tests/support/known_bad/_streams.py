"""Known-bad turn streams: the real agent, whose `stream` returns a `TurnStream` with one
seeded defect (rules V1-V4)."""

from __future__ import annotations

from trio_agents import Agent, Record, TurnEnd, TurnEvent, TurnResult, TurnText, turn_result
from trio_agents._agent._turn_stream import TurnStream

from ._agent import factory_for
from ._seeded import Seeded

# pyright: reportPrivateUsage=false


class _TextTwice(TurnStream):
    """A step's recorded text is handed out whole, also when its streamed pieces were."""

    __slots__ = ()

    def _read_record(self, record: Record) -> TurnEvent | None:
        if record.type == "assistant/message":
            self._read = 0
        return super()._read_record(record)


class _NoTurnEnd(TurnStream):
    """Iteration stops at the turn's last `TurnStepEnd`: the `TurnEnd` is never handed out
    (the turn is over anyway)."""

    __slots__ = ()

    def _take(self) -> TurnEvent | None:
        event = super()._take()
        return None if isinstance(event, TurnEnd) else event


class _CatchUpWindow(TurnStream):
    """A reader far behind catches up from the last few records only (a bounded copy, so
    a slow reader never copies much): what came before them is skipped."""

    __slots__ = ()

    def _next_record(self) -> Record | None:
        if not 0 <= self._cursor - self._batch_at < len(self._batch):
            behind = len(self._agent.session) - self._cursor
            if behind > WINDOW:
                self._cursor += behind - WINDOW
        return super()._next_record()


WINDOW = 4


class _ResultOfLatestTurn(TurnStream):
    """`result()` reads the session's latest finished turn, not its prompt's."""

    __slots__ = ()

    async def result(self) -> TurnResult:
        await super().result()
        records = self._agent.session.records
        last = max(int(r.data["turn"]) for r in records if r.type == "turn/end")
        return turn_result(records, last)


def _agent_with(stream: type[TurnStream]) -> type[Agent]:
    class _Streaming(Agent):
        __slots__ = ()

        def stream(self, content: str) -> TurnStream:
            return stream(self, self._events, content)

    _Streaming.__name__ = stream.__name__
    return _Streaming


stream_text_twice = factory_for(_agent_with(_TextTwice))
stream_without_turn_end = factory_for(_agent_with(_NoTurnEnd))
stream_catch_up_window = factory_for(_agent_with(_CatchUpWindow))
stream_result_of_latest_turn = factory_for(_agent_with(_ResultOfLatestTurn))

_ = TurnText  # the event the first two defects change

SEEDED: tuple[Seeded, ...] = (
    Seeded("stream-text-twice", stream_text_twice, "agent", "stream-follows-its-turn"),
    Seeded(
        "stream-without-turn-end", stream_without_turn_end, "agent", "stream-ends-with-turn-end"
    ),
    Seeded(
        "stream-catch-up-window",
        stream_catch_up_window,
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
