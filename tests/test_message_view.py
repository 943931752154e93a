"""A model request's messages are a view of the session's one transcript (D330): built in
O(1), and equal, whatever records come after it, to the messages a transcript rebuilt from
scratch from the records of its moment holds, which is what a request held when each step
copied the conversation. The Hypothesis test is the pin: random record sequences, including
open turns a crash left and their repair on resume, with views taken between any two records
(between an `assistant/message` and its `tool/call` too, the one place the transcript
replaces a message)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agents import (
    AgentOptions,
    Finish,
    Message,
    ModelChunk,
    ModelRequest,
    Session,
    TextDelta,
    ToolCall,
    ToolContext,
    open_agent,
)
from trio_agents._store._records import Record
from trio_agents._store._repair import closers
from trio_agents._store._transcript import MessageView, Transcript

SYSTEM = (Message("system", "be brief"),)

OPS = (
    "turn",
    "step",
    "steer",
    "context",
    "system-context",
    "reply",
    "interrupted-reply",
    "call",
    "result",
    "step-end",
    "turn-end",
    "queued",
    "approval",
    "view",
    "view-with-head",
    "crash",
)


@dataclass
class Taken:
    view: MessageView
    records: tuple[Record, ...]  # the session's records when the view was taken
    head: tuple[Message, ...]
    at_once: tuple[Message, ...]  # the view read the moment it was taken


def from_scratch(taken: Taken) -> tuple[Message, ...]:
    """What a request held before views: the head, then a copy of a transcript built anew."""
    return (*taken.head, *Transcript(taken.records).messages)


class Run:
    """A session driven record by record, resumed with its repair when it `crash`es."""

    def __init__(self) -> None:
        self.session = Session("s")
        self.turn = 0
        self.calls = 0
        self.open_calls: list[str] = []
        self.taken: list[Taken] = []

    def append(self, type: str, data: dict[str, object]) -> None:
        self.session.append(type, data)

    def do(self, op: str, text: str) -> None:
        if op == "turn":
            self.turn += 1
            self.append("turn/start", {"turn": self.turn})
            self.append("user/message", {"id": f"m{self.turn}", "content": text})
        elif op == "step":
            self.append("step/start", {"turn": self.turn, "step": 1})
        elif op == "steer":
            self.append("steering/message", {"id": "s", "content": text})
        elif op in ("context", "system-context"):
            data: dict[str, object] = {"id": "c", "content": text}
            if op == "system-context":
                data["role"] = "system"
            self.append("context/message", data)
        elif op == "reply":
            self.append("assistant/message", {"content": text, "finish": "stop"})
        elif op == "interrupted-reply":
            self.append("assistant/message", {"content": text, "interrupted": True})
        elif op == "call":
            self.calls += 1
            call_id = f"c{self.calls}"
            self.open_calls.append(call_id)
            self.append("tool/call", {"call_id": call_id, "name": "t", "arguments": {"x": text}})
        elif op == "result":
            call_id = self.open_calls.pop(0) if self.open_calls else "stray"
            self.append("tool/result", {"call_id": call_id, "content": text, "is_error": False})
        elif op == "step-end":
            self.append("step/end", {"turn": self.turn, "step": 1})
        elif op == "turn-end":
            self.append("turn/end", {"turn": self.turn, "reason": {"kind": "completed"}})
        elif op == "queued":
            self.append("prompt/queued", {"id": "q", "content": text})
        elif op == "approval":
            self.append("tool/approval", {"call_id": "c", "tool": "t", "decision": "allow"})
        elif op in ("view", "view-with-head"):
            head = SYSTEM if op == "view-with-head" else ()
            view = self.session.message_snapshot(head)
            taken = Taken(view, tuple(self.session.records), head, tuple(view))
            self.taken.append(taken)
        else:  # crash: resume from the records, the open turn repaired as the store does
            records = self.session.records
            self.session = Session("s", {}, [*records, *closers(records)])
            self.open_calls.clear()


@settings(max_examples=150, deadline=None)
@given(
    # Each op may be followed by a view, so views land between any two records.
    st.lists(
        st.tuples(st.sampled_from(OPS), st.text("ab", max_size=2), st.booleans()),
        min_size=1,
        max_size=60,
    ),
    st.data(),
)
def test_every_view_equals_a_transcript_rebuilt_from_its_records(
    ops: list[tuple[str, str, bool]], data: st.DataObject
) -> None:
    run = Run()
    for op, text, view in ops:
        run.do(op, text)
        if view:
            run.do("view-with-head" if len(text) == 1 else "view", "")
    run.do("view", "")
    for taken in run.taken:
        expected = from_scratch(taken)
        assert taken.at_once == expected
        # Later records, and a resume, changed nothing in it.
        assert_same_sequence(taken.view, expected, data)
    assert run.session.messages() == list(Transcript(run.session.records).messages)


def assert_same_sequence(
    view: MessageView, expected: tuple[Message, ...], data: st.DataObject
) -> None:
    """`view` behaves as the tuple `expected` would, on every Sequence operation."""
    assert len(view) == len(expected)
    assert tuple(view) == expected
    assert view == expected
    assert expected == view
    try:
        hashed = hash(expected)
    except TypeError:  # a tool call's arguments are a read-only dict
        with pytest.raises(TypeError):
            hash(view)
    else:
        assert hash(view) == hashed
    assert list(reversed(view)) == list(reversed(expected))
    assert [view[i] for i in range(-len(expected), len(expected))] == [
        expected[i] for i in range(-len(expected), len(expected))
    ]
    start = data.draw(st.integers(-len(expected) - 2, len(expected) + 2))
    stop = data.draw(st.integers(-len(expected) - 2, len(expected) + 2))
    step = data.draw(st.sampled_from([1, 2, -1, -3]))
    assert view[start:stop:step] == expected[start:stop:step]
    for message in expected:
        assert message in view
        assert view.index(message) == expected.index(message)
        assert view.count(message) == expected.count(message)
    for bad in (len(expected), -len(expected) - 1):
        with pytest.raises(IndexError):
            view[bad]


def test_a_view_keeps_the_assistant_message_it_saw_when_a_call_is_attached() -> None:
    session = Session("s")
    session.append("user/message", {"id": "m1", "content": "hi"})
    session.append("assistant/message", {"content": "let me look", "finish": "tool_calls"})
    before = session.message_snapshot()
    session.append("tool/call", {"call_id": "c1", "name": "ls", "arguments": {}})
    after = session.message_snapshot()
    assert before[-1] == Message("assistant", "let me look")
    assert list(before)[-1].tool_calls == ()
    assert after[-1].tool_calls == (ToolCall("c1", "ls", {}),)
    assert before != after
    assert before == (Message("user", "hi", source="prompt"), Message("assistant", "let me look"))


def test_a_view_is_no_list_and_no_tuple_but_compares_as_the_tuple_requests_held() -> None:
    session = Session("s")
    session.append("user/message", {"id": "m1", "content": "hi"})
    view = session.message_snapshot(SYSTEM)
    as_tuple = (*SYSTEM, Message("user", "hi", source="prompt"))
    assert isinstance(view, Sequence)
    assert view == as_tuple
    assert view != list(as_tuple)  # as a tuple is not equal to a list
    assert repr(view) == f"MessageView({list(as_tuple)!r})"
    assert session.message_snapshot() == session.message_snapshot()
    assert len(Session("empty").message_snapshot(SYSTEM)) == 1
    with pytest.raises(ValueError, match="cannot hold 3"):
        MessageView([], 3)


def test_a_view_of_a_long_history_allocates_as_little_as_one_of_a_short_one() -> None:
    """No copy: a hundred views of 4,000 messages, all kept, take the memory of a hundred
    small objects (a copy each would take 32 KB each)."""

    def allocated_by_views(turns: int) -> int:
        session = Session("s")
        for turn in range(turns):
            session.append("user/message", {"id": f"m{turn}", "content": "hi"})
            session.append("assistant/message", {"content": "ok", "finish": "stop"})
        gc.collect()
        ours = not tracemalloc.is_tracing()  # leave a tracing someone else started running
        if ours:
            tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            kept = [session.message_snapshot(SYSTEM) for _ in range(100)]
            used = tracemalloc.get_traced_memory()[0] - before
        finally:
            if ours:
                tracemalloc.stop()
        assert len(kept[-1]) == 2 * turns + 1
        return used

    short, long = allocated_by_views(10), allocated_by_views(2000)
    # Under 256 bytes a view, whatever the history (the allocator's own bookkeeping moves a
    # little between runs); one copy of the long history is 32,000 bytes.
    assert short < 100 * 256, short
    assert long < 100 * 256, long


class KeepingModel:
    """Keeps every request, with a copy of its messages made when it was sent; calls one
    tool per prompt, then answers."""

    def __init__(self) -> None:
        self.kept: list[tuple[ModelRequest, tuple[Message, ...], int]] = []
        self.records: Callable[[], int] = lambda: 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        self.kept.append((request, tuple(request.messages), self.records()))
        await trio.lowlevel.checkpoint()
        last = request.messages[-1]
        if last.role == "user" and last.source == "prompt":
            yield TextDelta("looking")
            yield ToolCall(f"c{len(request.messages)}", "echo", {"text": last.content})
            yield Finish("tool_calls")
        else:
            yield TextDelta("done")
            yield Finish("stop")


class Echo:
    name = "echo"
    description = "says it back"
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}}  # noqa: RUF012

    async def __call__(self, arguments: object, context: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        return "echoed"


async def test_the_requests_an_agent_sent_stay_what_was_sent_and_match_the_history() -> None:
    model = KeepingModel()
    options = AgentOptions(system_prompt="be brief")
    async with open_agent(model, tools=[Echo()], options=options) as agent:
        model.records = lambda: len(agent.session)
        for index in range(5):
            agent.send(f"prompt {index}")
            agent.inject(Message("system", f"note {index}"))
            agent.steer(f"steer {index}")
            await agent.wait_idle()
        records = agent.session.records
    assert len(model.kept) >= 10
    for request, sent, count in model.kept:
        assert type(request.messages) is MessageView  # not a copy of the conversation
        assert tuple(request.messages) == sent
        assert request.messages == (
            Message("system", "be brief"),
            *Transcript(records[:count]).messages,
        )
