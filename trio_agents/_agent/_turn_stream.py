"""`TurnStream`: follow one prompt's turn from trio code, as `Agent.stream` hands it out.

The stream is a reader of the session, not a queue the agent fills. Its record observer and
event listener wake the reader and never wait (the listener also looks, once per record, for
where the turn starts), so the agent's loop runs at its own pace whatever the reader does;
the reader walks the session's records behind it with a cursor (they are kept anyway).

The one thing not recorded while it happens is a step's streamed text: the stream holds the
pieces of the step in progress that the reader has not taken yet, at most that step's text,
and drops them once the step's `assistant/message` records the text whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

import trio

from .._errors import TurnNotFoundError
from .._store._records import (
    ASSISTANT_MESSAGE,
    PROMPT_DROPPED,
    STEP_START,
    TOOL_CALL,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Record,
)
from ._events import Event, EventBus, TextStreamed
from ._status import AgentStatus
from ._turn import MessageId
from ._turn_events import TurnDropped, TurnEnd, TurnEvent, TurnText, record_event
from ._turn_result import TurnResult, turn_result

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["TurnStream"]


class TurnStream:
    """One prompt's turn as it happens: `async with agent.stream(prompt) as turn:`, then
    `async for event in turn:` and `await turn.result()`.

    Entering sends the prompt (as `send`: it may queue behind other work). The events are
    the turn's only, in order: `TurnText`, `TurnToolCall`, `TurnToolResult`, `TurnStepEnd`,
    and last `TurnEnd`, which also ends a cancelled or closed turn; a prompt dropped before
    its turn started gives one `TurnDropped`. Leaving the block stops following the turn; it
    does not cancel it (`agent.cancel()` does).
    """

    __slots__ = (
        "_agent",
        "_batch",
        "_batch_at",
        "_bus",
        "_changed",
        "_cursor",
        "_done",
        "_dropped",
        "_end_index",
        "_entered_at",
        "_exited",
        "_following",
        "_live",
        "_live_step",
        "_names",
        "_prompt",
        "_prompt_id",
        "_read",
        "_scanned",
        "_start",
        "_step",
        "_stop",
        "_turn",
        "_turn_start",
    )

    def __init__(self, agent: Agent, bus: EventBus, prompt: str) -> None:
        self._agent = agent
        self._bus = bus
        self._prompt = prompt
        self._prompt_id: MessageId | None = None
        self._changed = trio.lowlevel.ParkingLot()
        self._stop: list[Callable[[], None]] = []
        self._following = False
        # Where the turn is, found by scanning the records appended since the last scan
        # (`_locate`): the records say it, whichever observer ran.
        self._scanned = 0
        self._turn_start: tuple[int, int] | None = None  # the last `turn/start`: index, number
        self._turn: int | None = None
        self._start: int | None = None  # the index of the turn's `turn/start`
        self._end_index: int | None = None
        self._dropped: str | None = None  # the reason of a recorded `prompt/dropped`
        # The reader's side: the next record to read, records fetched but not yet read.
        self._cursor = self._entered_at = 0
        self._batch: Sequence[Record] = ()
        self._batch_at = 0  # the index of the batch's first record
        self._step = 0
        self._names: dict[str, str] = {}
        self._read = 0  # characters of the reader's step's text handed out
        # The streamed pieces of the step in progress (`_live_step`) not yet handed out;
        # dropped when the step's `assistant/message` records its whole text.
        self._live: list[str] = []
        self._live_step: int | None = None
        self._exited = False  # the agent's loop has exited: nothing more will be appended
        self._done = False

    @property
    def prompt_id(self) -> MessageId:
        """The prompt's message id (what `send` returned). Raises RuntimeError before the
        block is entered."""
        if self._prompt_id is None:
            raise RuntimeError("the stream's prompt is sent on entering `async with`")
        return self._prompt_id

    @property
    def turn(self) -> int | None:
        """The turn's number once it has started, else None."""
        if self._turn is None and self._following:
            self._locate()
        return self._turn

    async def __aenter__(self) -> TurnStream:
        """Start following the agent's records and events, then send the prompt. Always a
        checkpoint, before anything is sent. Raises what `send` raises (AgentClosedError,
        TypeError), having sent nothing; RuntimeError if entered before."""
        # The checkpoint comes first: once the prompt is sent, nothing may stop us from
        # returning the stream that owns the listener and the observer.
        await trio.lowlevel.checkpoint()
        if self._following or self._prompt_id is not None:
            raise RuntimeError("a TurnStream is entered once; call agent.stream() again")
        session = self._agent.session
        self._cursor = self._entered_at = self._scanned = len(session)
        self._stop.append(session.observe(self._on_record))
        self._stop.append(self._bus.connect(self._on_event))
        self._following = True
        try:
            self._prompt_id = self._agent.send(self._prompt)
        except BaseException:
            self._unfollow()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop following: the listener and the observer are gone, the turn goes on.
        Always a checkpoint."""
        self._unfollow()
        await trio.lowlevel.checkpoint()

    def _unfollow(self) -> None:
        self._following = False
        while self._stop:
            self._stop.pop()()
        self._changed.unpark_all()

    # -- the agent's side: never blocks, never raises --------------------------------------

    def _on_record(self, record: Record) -> None:
        if record.type == ASSISTANT_MESSAGE and self._live_step is not None:
            # The step's text is recorded whole: the pieces are no longer needed.
            self._live.clear()
            self._live_step = None
        self._changed.unpark_all()

    def _on_event(self, event: Event) -> None:
        if self._turn is None:
            self._locate()
        if (
            isinstance(event, TextStreamed)
            and event.agent_id == self._agent.id
            and event.turn == self._turn
        ):
            if event.step != self._live_step:
                self._live.clear()
                self._live_step = event.step
            self._live.append(event.text)
        # Any event may be the one after which the prompt is no longer queued (a cancel, a
        # close) or the loop has exited.
        self._changed.unpark_all()

    # -- the reader's side ----------------------------------------------------------------

    def __aiter__(self) -> TurnStream:
        """The stream itself: its events are read once, by whoever iterates it."""
        return self

    async def __anext__(self) -> TurnEvent:
        """The turn's next event; waits for it. Always a checkpoint. Ends after `TurnEnd`
        or `TurnDropped`, once the block is left, or (with neither end: a PersistenceError
        stopped the agent) once the agent's loop has exited."""
        await trio.lowlevel.checkpoint()
        while True:
            event = self._take()
            if event is not None:
                return event
            if self._done or not self._following:
                raise StopAsyncIteration
            if not await self._wait():
                self._done = True

    async def result(self) -> TurnResult:
        """Wait for the turn to end and return its result, read from its records (as
        `turn_result`). Works whether or not the events were read. Always a checkpoint.

        After the block is left it waits for nothing: it reads the records as they are.

        Raises TurnNotFoundError if the prompt was dropped before its turn started, the
        agent's loop stopped before the turn ended, or (the block left) the turn has not
        ended yet.
        """
        await trio.lowlevel.checkpoint()
        if self._prompt_id is None:
            raise RuntimeError("the stream's prompt is sent on entering `async with`")
        exited = False
        while self._following and not exited:
            self._locate()
            if self._end_index is not None:
                break
            lost = self._lost()
            if lost is not None:
                raise TurnNotFoundError(
                    f"prompt {self._prompt_id!r} has no turn: it was dropped ({lost}) "
                    "before its turn started"
                )
            exited = not await self._wait()
        self._locate()
        if exited and self._end_index is None:
            raise TurnNotFoundError(
                f"the loop of agent {self._agent.id!r} stopped before the turn of prompt "
                f"{self._prompt_id!r} ended"
            )
        lost = self._lost()
        if lost is not None:
            raise TurnNotFoundError(
                f"prompt {self._prompt_id!r} has no turn: it was dropped ({lost}) "
                "before its turn started"
            )
        # The block left, the turn may still run: turn_result says so.
        return turn_result(self._agent.session.records_since(self._entered_at), self._prompt_id)

    def _locate(self) -> None:
        """Find the turn's `turn/start`, its `turn/end` or the prompt's `prompt/dropped` in
        the records appended since the last call. Each record is looked at once."""
        session = self._agent.session
        if self._end_index is not None or self._scanned >= len(session):
            return
        start = self._scanned
        records = session.records_since(start)
        self._scanned = start + len(records)
        for index, record in enumerate(records, start):
            if record.type == TURN_START:
                self._turn_start = (index, int(record.data["turn"]))
            elif record.type == USER_MESSAGE and self._start is None:
                opened = self._turn_start
                if record.data["id"] == self._prompt_id and opened and opened[0] == index - 1:
                    self._start, self._turn = opened
            elif record.type == TURN_END and self._start is not None:
                if record.data["turn"] == self._turn:
                    self._end_index = index
                    return
            elif record.type == PROMPT_DROPPED and self._prompt_id in record.data["ids"]:
                self._dropped = str(record.data["reason"])

    async def _wait(self) -> bool:
        """Wait for the agent to change anything; False if its loop has exited instead."""
        if self._agent.status is AgentStatus.CLOSED:
            # A closed agent appends only while its loop unwinds, and announces no event
            # when the loop exits: wait for that, after which every record there will be
            # is there.
            if self._exited:
                return False
            await self._agent.wait_idle()
            self._exited = True
            return True
        await self._changed.park()
        return True

    def _lost(self) -> str | None:
        """Why the prompt will never get a turn, or None while it may."""
        if self._turn is not None or self._prompt_id is None:
            return None
        if self._dropped is not None:
            return self._dropped
        if any(mid == self._prompt_id for mid, _ in self._agent.pending):
            return None
        # Only a cancel or a close takes a queued prompt away without a record (one sent to
        # an idle agent has none until its turn starts).
        return "closed" if self._agent.status is AgentStatus.CLOSED else "cancelled"

    def _take(self) -> TurnEvent | None:
        if self._done or not self._following:
            return None
        self._locate()
        if self._start is None:
            lost = self._lost()
            if lost is None:
                return None
            self._done = True
            return TurnDropped(self.prompt_id, lost)
        self._cursor = max(self._cursor, self._start)
        while True:
            record = self._next_record()
            if record is None:
                break
            event = self._read_record(record)
            if event is not None:
                if isinstance(event, TurnEnd):
                    self._done = True
                return event
        # Caught up with the records: the step in progress is the reader's step.
        if self._live and self._live_step == self._step:
            text = "".join(self._live)
            self._live.clear()
            self._read += len(text)
            return TurnText(self._step, text)
        return None

    def _next_record(self) -> Record | None:
        if self._end_index is not None and self._cursor > self._end_index:
            return None
        at = self._cursor - self._batch_at
        if not 0 <= at < len(self._batch):
            # One copy of what is new, read record by record: a slow reader does not copy
            # the history once per event.
            self._batch = self._agent.session.records_since(self._cursor)
            self._batch_at = self._cursor
            at = 0
            if not self._batch:
                return None
        self._cursor += 1
        return self._batch[at]

    def _read_record(self, record: Record) -> TurnEvent | None:
        if record.type == STEP_START:
            self._step = int(record.data["step"])
            self._read = 0
            return None
        if record.type == ASSISTANT_MESSAGE:
            # The whole text of the step: hand out what the live pieces have not.
            rest = str(record.data["content"])[self._read :]
            self._read += len(rest)
            if self._live_step == self._step:
                self._live.clear()
                self._live_step = None
            return TurnText(self._step, rest) if rest else None
        if record.type == TOOL_CALL:
            self._names[str(record.data["call_id"])] = str(record.data["name"])
        return record_event(record, self._step, self._names)
