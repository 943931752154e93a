"""The agent machine's streams: prompts sent through `agent.stream(prompt)`, each followed
by a reader in the background, checked against the records of its turn (rules V1-V4).

A reader is eager (it takes each event as it comes) or slow (it reads nothing until a rule,
or the close, lets it): either way it must get exactly the events of its prompt's turn, in
the order of the turn's records, ending with the turn's `TurnEnd` (or one `TurnDropped`),
and its `result()` must be `turn_result(records, prompt_id)`. An agent without `stream`
gets a plain `send` instead, so programs are drawn alike; the report says what that left
unchecked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import trio
from hypothesis import strategies as st
from hypothesis.stateful import precondition

from trio_agents import (
    AgentClosedError,
    AgentStatus,
    Record,
    TextStreamed,
    TurnDropped,
    TurnEnd,
    TurnNotFoundError,
    TurnStepEnd,
    TurnText,
    TurnToolCall,
    TurnToolResult,
    turn_result,
)

from ._agent_harness import NEIGHBOUR, NEIGHBOUR_TEXT, is_neighbours
from ._agent_properties import (
    STATUS_AFTER_SEND,
    STREAM_ENDS_WITH_TURN_END,
    STREAM_FOLLOWS_ITS_TURN,
    STREAM_RESULT_FROM_RECORDS,
    STREAM_SLOW_READER_LOSES_NOTHING,
)
from ._agent_windows import AgentWindows
from ._machine import rule
from ._vocabulary import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)

__all__ = ["AgentStreams", "expected_events", "seen_events", "turn_of"]

Item = tuple[Any, ...]


@dataclass
class Reader:
    """One prompt sent through `stream`, and what its reader got."""

    content: str
    eager: bool
    drain: trio.Event = field(default_factory=trio.Event)
    prompt_id: str | None = None
    status: AgentStatus | None = None
    events: list[object] = field(default_factory=list[object])
    iterated: bool = False  # its `async for` ended
    result: object = None  # the TurnResult, or the error `result()` raised
    resulted: bool = False
    raised: BaseException | None = None  # what entering or reading raised
    checked: bool = False


def turn_of(records: Sequence[Record], prompt_id: str) -> tuple[list[Record] | None, str | None]:
    """(the records of the turn whose prompt is `prompt_id`, from its `turn/start` to its
    `turn/end` or the last record; the reason a `prompt/dropped` gives for it): at most one
    of them is not None."""
    start: int | None = None
    for at, record in enumerate(records):
        if record.type == TURN_START:
            start = at
        elif record.type == USER_MESSAGE and record.data.get("id") == prompt_id:
            if start is None:
                return None, None
            end = next((j for j in range(at, len(records)) if records[j].type == TURN_END), None)
            return list(records[start : (end + 1 if end is not None else len(records))]), None
        elif record.type == "prompt/dropped" and prompt_id in record.data.get("ids", ()):
            return None, str(record.data.get("reason"))
    return None, None


def expected_events(turn: Sequence[Record]) -> list[Item]:
    """What a stream of `turn` (its records) yields, as comparable items."""
    items: list[Item] = []
    step: int | None = None
    for record in turn:
        data = record.data
        if record.type == STEP_START:
            step = int(data["step"])
        elif record.type == ASSISTANT_MESSAGE and data.get("content"):
            items.append(("text", step, str(data["content"])))
        elif record.type == TOOL_CALL:
            items.append(("call", step, str(data["call_id"]), str(data["name"])))
        elif record.type == TOOL_RESULT:
            items.append(
                ("result", step, str(data["call_id"]), str(data["content"]), bool(data["is_error"]))
            )
        elif record.type == STEP_END:
            items.append(("step-end", step))
        elif record.type == TURN_END:
            items.append(("end", int(data["turn"]), dict(data["reason"])))
    return items


def seen_events(events: Sequence[object]) -> list[Item]:
    """What a reader got, as comparable items: a step's texts joined."""
    items: list[Item] = []
    for event in events:
        if isinstance(event, TurnText):
            if not event.text:
                continue
            if items and items[-1][0] == "text" and items[-1][1] == event.step:
                items[-1] = ("text", event.step, items[-1][2] + event.text)
            else:
                items.append(("text", event.step, event.text))
        elif isinstance(event, TurnToolCall):
            items.append(("call", event.step, event.call_id, event.name))
        elif isinstance(event, TurnToolResult):
            items.append(("result", event.step, event.call_id, event.content, event.is_error))
        elif isinstance(event, TurnStepEnd):
            items.append(("step-end", event.step))
        elif isinstance(event, TurnEnd):
            items.append(("end", event.turn, dict(event.reason)))
        elif isinstance(event, TurnDropped):
            items.append(("dropped", str(event.prompt_id), event.reason))
        else:
            items.append(("unknown", repr(event)))
    return items


def result_from(turn: Sequence[Record], prompt_id: str) -> dict[str, object]:
    """What the contract says a finished turn's `TurnResult` holds, read from its records
    here (not by `turn_result`, which the check compares with this too)."""
    texts = [str(r.data.get("content", "")) for r in turn if r.type == ASSISTANT_MESSAGE]
    calls = [str(r.data["call_id"]) for r in turn if r.type == TOOL_CALL]
    results = {str(r.data["call_id"]): r.data for r in turn if r.type == TOOL_RESULT}
    prompt = next(
        (
            str(r.data["content"])
            for r in turn
            if r.type == USER_MESSAGE and r.data.get("id") == prompt_id
        ),
        "",
    )
    return {
        "turn": int(turn[0].data["turn"]),
        "prompt_id": prompt_id,
        "prompt": prompt,
        "text": texts[-1] if texts else "",
        "calls": [
            (c, str(results[c]["content"]), bool(results[c]["is_error"])) if c in results else (c,)
            for c in calls
        ],
        "end": dict(turn[-1].data["reason"]),
        "steps": sum(1 for r in turn if r.type == STEP_START),
        "usage": _summed_usage(turn),
    }


def _summed_usage(turn: Sequence[Record]) -> tuple[int, int] | None:
    """(input, output) tokens summed over the replies that reported usage; None if none."""
    reported = [
        r.data["usage"] for r in turn if r.type == ASSISTANT_MESSAGE and r.data.get("usage")
    ]
    if not reported:
        return None
    return (
        sum(int(u.get("input_tokens", 0)) for u in reported),
        sum(int(u.get("output_tokens", 0)) for u in reported),
    )


def result_seen(result: object) -> dict[str, object]:
    """The same fields of a `TurnResult`."""
    got: Any = result
    return {
        "turn": got.turn,
        "prompt_id": str(got.prompt_id),
        "prompt": got.prompt,
        "text": got.text,
        "calls": [(c.call_id, c.content, c.is_error) for c in got.tool_calls],
        "end": dict(got.end),
        "steps": got.steps,
        "usage": None if got.usage is None else (got.usage.input_tokens, got.usage.output_tokens),
    }


def _size(items: Sequence[Item]) -> tuple[int, int]:
    """(events, characters of text): what a reader that lost something has less of."""
    text = sum(len(item[2]) for item in items if item[0] == "text")
    return len(items), text


def _body(items: Sequence[Item]) -> Sequence[Item]:
    """`items` without a last `end` (V2's part)."""
    return items[:-1] if items and items[-1][0] == "end" else items


class AgentStreams(AgentWindows):
    """The stream rules and checks of `AgentMachine`."""

    def __init__(self, host: Any) -> None:
        super().__init__(host)
        self.readers: list[Reader] = []
        self._results_checked = 0  # turn/end records whose turn_result was checked (V4)

    def send(self) -> None:
        """The machine's `send` rule (`AgentMachine`): what an agent without `stream`
        gets instead."""
        raise NotImplementedError

    def _accepted(self, mid: str) -> None:
        """The machine's bookkeeping of a prompt `mid` just sent (`AgentMachine`)."""
        raise NotImplementedError

    def _has_stream(self) -> bool:
        if hasattr(self.agent, "stream"):
            return True
        type(self).stats["without stream"] = 1  # checked without it, as if declared
        return False

    @precondition(lambda self: self.has.stream)
    @rule(eager=st.booleans())
    def send_streamed(self, eager: bool) -> None:
        """Send a prompt by entering `agent.stream(prompt)`, followed by a reader that takes
        each event as it comes (`eager`) or reads nothing until let (V1-V4)."""
        if not self._has_stream():
            self.send()
            return
        reader = Reader(self._content("prompt"), eager)
        idle, closed = self.ref.status == "idle", self.ref.status == "closed"
        self.host.call(self.host.nursery.start, self._follow, reader)
        if closed:
            STREAM_FOLLOWS_ITS_TURN.check(
                isinstance(reader.raised, AgentClosedError) and reader.prompt_id is None,
                lambda: (
                    f"entering stream() on the CLOSED agent gave {reader.raised!r}, not "
                    "AgentClosedError, as send() raises"
                ),
            )
            return
        if reader.raised is not None or reader.prompt_id is None:
            STREAM_FOLLOWS_ITS_TURN.fail(f"entering stream() raised {reader.raised!r}")
        mid = reader.prompt_id
        self.contents[mid] = reader.content
        STATUS_AFTER_SEND.check(
            not idle or reader.status is AgentStatus.RUNNING,
            lambda: f"stream() of {mid} entered from IDLE with the agent {reader.status}",
        )
        self.readers.append(reader)
        self.host.settle()
        self._accepted(mid)

    def _neighbour_echoes(self, event: object) -> None:
        """A listener of the machine's bus: another agent on it streams a piece of text in
        every turn and step this agent streams in, right after each of its pieces (V1: a
        stream yields the events of its prompt's turn only, not of a turn of that number)."""
        if isinstance(event, TextStreamed) and not is_neighbours(event):
            self.bus.emit(TextStreamed(NEIGHBOUR, event.turn, event.step, NEIGHBOUR_TEXT))

    @precondition(lambda self: any(not r.drain.is_set() for r in self.readers))
    @rule()
    def read_streams(self) -> None:
        """Let every slow reader read what its stream holds."""
        for reader in self.readers:
            self.host.run_sync(reader.drain.set)
        self.host.settle()

    async def _follow(self, reader: Reader, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        if reader.eager:
            reader.drain.set()
        try:
            async with self.agent.stream(reader.content) as stream:
                reader.prompt_id = str(stream.prompt_id)
                reader.status = self.agent.status
                task_status.started()
                await reader.drain.wait()
                async for event in stream:
                    reader.events.append(event)
                reader.iterated = True
                try:
                    reader.result = await stream.result()
                except TurnNotFoundError as exc:
                    reader.result = exc
                reader.resulted = True
        except Exception as exc:  # what the stream raised is the finding, not a crash
            reader.raised = exc
            if reader.prompt_id is None:
                task_status.started()

    # -- checks ------------------------------------------------------------------------------

    def _verify(self) -> None:
        super()._verify()
        self._check_turn_results()
        for reader in self.readers:
            ended = reader.drain.is_set() and any(
                isinstance(e, TurnEnd | TurnDropped) for e in reader.events
            )
            if ended and not reader.iterated and reader.raised is None:
                # Every task is blocked: a reader that got its turn's end and still waits
                # for a next event was not told the iteration ended (V2).
                STREAM_ENDS_WITH_TURN_END.fail(
                    f"the stream of {reader.prompt_id} gave {seen_events(reader.events)} and "
                    "its iteration did not end after its turn's end: the reader waits for more"
                )
            if reader.resulted and not reader.checked:
                self._check_reader(reader)
            elif reader.raised is not None:
                STREAM_FOLLOWS_ITS_TURN.fail(
                    f"reading the stream of {reader.prompt_id} raised {reader.raised!r}"
                )

    def _check_turn_results(self) -> None:
        """V4 on every turn that ended since the last check, streamed or not:
        `turn_result(records, prompt_id)` holds what the turn's records say, read here."""
        records = self.records
        ends = [at for at, r in enumerate(records) if r.type == TURN_END]
        for end in ends[self._results_checked :]:
            start = next((at for at in range(end, -1, -1) if records[at].type == TURN_START), None)
            if start is None:
                continue
            turn = records[start : end + 1]
            mid = next((str(r.data["id"]) for r in turn if r.type == USER_MESSAGE), None)
            if mid is None:
                continue
            wanted = result_from(turn, mid)
            try:
                got: object = result_seen(turn_result(records, mid))
            except Exception as exc:  # what it raised is the finding
                got = exc
            if got != wanted:
                STREAM_RESULT_FROM_RECORDS.fail(
                    f"turn_result(records, {mid!r}) gave {got!r}; the records of its turn "
                    f"give {wanted!r}"
                )
        self._results_checked = len(ends)

    def _check_streams_at_close(self) -> None:
        """Once the agent is closed: every reader, let read, ends with what it must."""
        for reader in self.readers:
            self.host.run_sync(reader.drain.set)
        self.host.settle()
        for reader in self.readers:
            if not reader.resulted:
                if reader.raised is not None:
                    STREAM_ENDS_WITH_TURN_END.fail(
                        f"reading the stream of {reader.prompt_id} raised {reader.raised!r}"
                    )
                got = seen_events(reader.events)
                STREAM_ENDS_WITH_TURN_END.fail(
                    f"the agent is closed and the stream of {reader.prompt_id} has not ended "
                    f"({'its iteration' if not reader.iterated else 'its result()'} still "
                    f"waits), after {got}"
                )
            if not reader.checked:
                self._check_reader(reader)

    def _check_reader(self, reader: Reader) -> None:
        reader.checked = True
        mid = reader.prompt_id
        assert mid is not None
        records = self.records
        turn, dropped = turn_of(records, mid)
        got = seen_events(reader.events)
        if dropped is not None:
            STREAM_ENDS_WITH_TURN_END.check(
                got == [("dropped", mid, dropped)],
                lambda: (
                    f"the prompt {mid} was dropped ({dropped}) before its turn; its stream "
                    f"gave {got}, not one TurnDropped"
                ),
            )
            STREAM_RESULT_FROM_RECORDS.check(
                isinstance(reader.result, TurnNotFoundError),
                lambda: (
                    f"result() of the dropped prompt {mid} gave {reader.result!r}, not "
                    "TurnNotFoundError"
                ),
            )
            return
        expected = expected_events(turn or [])
        if not expected or expected[-1][0] != "end":
            STREAM_ENDS_WITH_TURN_END.fail(
                f"the stream of {mid} ended after {got}, while its turn has not ended (its "
                f"records: {expected})"
            )
        how = "read as it came" if reader.eager else "read only once let"
        # A reader that got less than its turn was behind the agent when it lost it, however
        # eagerly it meant to read (V3); anything else wrong is V1's or V2's.
        STREAM_SLOW_READER_LOSES_NOTHING.check(
            _size(_body(got)) >= _size(expected[:-1]),
            lambda: (
                f"the stream of {mid} ({how}) gave {got}; the records of its turn give {expected}"
            ),
        )
        STREAM_ENDS_WITH_TURN_END.check(
            bool(got) and got[-1] == expected[-1],
            lambda: f"the stream of {mid} ended with {got[-1:]}, not its turn's end {expected[-1]}",
        )
        STREAM_FOLLOWS_ITS_TURN.check(
            got == expected,
            lambda: (
                f"the stream of {mid} ({how}) gave {got}; the records of its turn give {expected}"
            ),
        )
        wanted = turn_result(records, mid)
        STREAM_RESULT_FROM_RECORDS.check(
            reader.result == wanted and result_seen(reader.result) == result_from(turn or [], mid),
            lambda: (
                f"result() of {mid} gave {reader.result!r}; turn_result(records, {mid!r}) "
                f"gives {wanted!r}"
            ),
        )
