"""Following a turn in code (rules V1-V4): `Agent.stream`, `TurnStream.result` and
`turn_result`, over scripted models on the autojump clock, and the example program run as a
process."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import trio
import trio.testing

from trio_agents import (
    Agent,
    AgentClosedError,
    AgentStatus,
    EventBus,
    Finish,
    ModelChunk,
    ModelRequest,
    PersistenceError,
    Record,
    Session,
    TextDelta,
    ToolCall,
    ToolContext,
    TurnDropped,
    TurnEnd,
    TurnEndReason,
    TurnEvent,
    TurnNotFoundError,
    TurnStepEnd,
    TurnStream,
    TurnText,
    TurnToolCall,
    TurnToolResult,
    Usage,
    open_agent,
    turn_result,
)
from trio_agents.testing import HOLD, EchoTool, GateTool, ScriptedModel, ScriptedStep, reply

from .support.helpers import of_type

ROOT = pathlib.Path(__file__).resolve().parent.parent


class Failing:
    """A tool that always raises: its call is answered with an error result."""

    name = "broken"
    description = "Always fails."
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        raise OSError("disk on fire")


def two_steps() -> ScriptedModel:
    """Step 1: text and two calls (one fails); step 2: the answer in three pieces. Both
    steps report usage."""
    return ScriptedModel(
        [
            ScriptedStep(
                (
                    TextDelta("Looking. "),
                    ToolCall("c1", "echo", {"text": "found it"}),
                    ToolCall("c2", "broken", {}),
                    Finish("tool_calls", Usage(10, 3)),
                )
            ),
            ScriptedStep(
                (
                    TextDelta("It "),
                    TextDelta("says "),
                    TextDelta("found it."),
                    Finish("stop", Usage(25, 4)),
                )
            ),
        ]
    )


async def follow(stream: TurnStream) -> list[TurnEvent]:
    return [event async for event in stream]


def recorded_texts(agent: Agent) -> list[str]:
    return [str(data["content"]) for data in of_type(agent, "assistant/message")]


def normalized(events: list[TurnEvent]) -> list[TurnEvent]:
    """`events` with the parts the scheduler decides made canonical: adjacent text of one step
    joined (how a step's pieces are split into events depends on when the reader runs),
    and the results of one step's calls, which run concurrently, in call id order."""
    out: list[TurnEvent] = []
    for event in events:
        last = out[-1] if out else None
        if isinstance(event, TurnText) and isinstance(last, TurnText) and last.step == event.step:
            out[-1] = TurnText(event.step, last.text + event.text)
        else:
            out.append(event)
    i = 0
    while i < len(out):
        j = i
        while j < len(out) and isinstance(out[j], TurnToolResult):
            j += 1
        out[i:j] = sorted(out[i:j], key=lambda e: e.call_id)  # type: ignore[union-attr]
        i = j + 1
    return out


def joined_text(events: list[TurnEvent], step: int) -> str:
    return "".join(e.text for e in events if isinstance(e, TurnText) and e.step == step)


async def test_V1_a_two_step_turn_with_tools_streams_in_order_and_ends_with_its_end() -> None:
    agents = open_agent(two_steps(), tools=[EchoTool(), Failing()])
    async with agents as agent, agent.stream("find it") as turn:
        assert turn.prompt_id == "m1"
        events = await follow(turn)
        assert turn.turn == 1
    assert normalized(events) == [
        TurnText(1, "Looking. "),
        TurnToolCall(1, "c1", "echo", {"text": "found it"}),
        TurnToolCall(1, "c2", "broken", {}),
        TurnToolResult(1, "c1", "echo", "found it", False),
        TurnToolResult(1, "c2", "broken", "OSError: disk on fire", True),
        TurnStepEnd(1),
        TurnText(2, "It says found it."),
        TurnStepEnd(2),
        TurnEnd(1, {"kind": "completed"}),
    ]
    assert [joined_text(events, 1), joined_text(events, 2)] == recorded_texts(agent)
    # The reader kept up: step 2's pieces came live, not from the record at the step's end.
    assert sum(isinstance(e, TurnText) and e.step == 2 for e in events) > 1


async def test_V4_the_result_reads_the_turn_from_its_records() -> None:
    async with open_agent(two_steps(), tools=[EchoTool(), Failing()]) as agent:
        async with agent.stream("find it") as turn:
            # Without reading a single event.
            result = await turn.result()
        await agent.wait_idle()
        records = agent.session.records
    assert result.turn == 1
    assert (result.prompt_id, result.prompt) == ("m1", "find it")
    assert result.text == "It says found it."
    assert result.end == {"kind": "completed"}
    assert result.steps == 2
    assert result.usage == Usage(35, 7)
    assert [(c.step, c.call_id, c.name, c.is_error) for c in result.tool_calls] == [
        (1, "c1", "echo", False),
        (1, "c2", "broken", True),
    ]
    assert result.tool_calls[0].content == "found it"
    assert dict(result.tool_calls[0].arguments) == {"text": "found it"}
    assert not any(c.interrupted or c.rejected for c in result.tool_calls)
    # The same from the records alone, by prompt id or by turn number.
    assert turn_result(records, "m1") == result
    assert turn_result(records, 1) == result


async def test_turn_result_refuses_a_turn_that_is_missing_or_has_not_ended() -> None:
    model = ScriptedModel([reply("a"), reply("b", hold=True)])
    async with open_agent(model) as agent:
        agent.send("one")
        await agent.wait_idle()
        agent.send("two")
        await trio.testing.wait_all_tasks_blocked()
        records = agent.session.records
        assert turn_result(records, 1).usage is None  # the model reported none
        with pytest.raises(TurnNotFoundError, match="turn 2 has not ended"):
            turn_result(records, 2)
        with pytest.raises(TurnNotFoundError, match="no turn 'm9'"):
            turn_result(records, "m9")
        with pytest.raises(TurnNotFoundError, match="no turn 3"):
            turn_result(records, 3)
        model.release()


async def test_V2_a_cancel_mid_stream_ends_the_iterator_with_the_aborted_turns_end() -> None:
    model = ScriptedModel(
        [
            ScriptedStep((ToolCall("c1", "echo", {"text": "x"}), Finish("tool_calls"))),
            ScriptedStep((TextDelta("half an "), HOLD, TextDelta("answer"), Finish("stop"))),
        ]
    )
    async with open_agent(model, tools=[EchoTool()]) as agent, agent.stream("go") as turn:
        events: list[TurnEvent] = []
        async for event in turn:
            events.append(event)
            if event == TurnText(2, "half an "):
                # The model is held in the middle of step 2's text.
                assert agent.cancel("enough")
        result = await turn.result()
    assert events[-3:] == [
        TurnText(2, "half an "),
        TurnStepEnd(2),
        TurnEnd(1, {"kind": "aborted", "reason": "enough", "cause": "user"}),
    ]
    assert result.end == {"kind": "aborted", "reason": "enough", "cause": "user"}
    assert result.text == "half an "  # the interrupted reply, as recorded
    assert result.steps == 2


async def test_V3_a_consumer_slower_than_the_model_loses_nothing_nor_holds_the_agent() -> None:
    pieces = [f"w{i} " for i in range(300)]
    model = ScriptedModel(
        [
            ScriptedStep(
                (
                    *(TextDelta(p) for p in pieces[:150]),
                    ToolCall("c1", "echo", {"text": "t"}),
                    Finish("tool_calls"),
                )
            ),
            ScriptedStep((*(TextDelta(p) for p in pieces[150:]), Finish("stop"))),
        ]
    )
    held: list[int] = []
    async with open_agent(model, tools=[EchoTool()]) as agent, agent.stream("go") as turn:
        first = await turn.__anext__()
        start = trio.current_time()
        # The reader naps while the model streams: the agent runs on to IDLE without it.
        await agent.wait_idle()
        assert trio.current_time() == start  # the agent waited for nobody
        held.append(len(turn._live))  # pyright: ignore[reportPrivateUsage]
        events = [first]
        async for event in turn:
            await trio.sleep(1)  # a slow consumer
            events.append(event)
    assert held == [0]  # the whole text is in the records: the stream holds none of it
    assert agent.status is AgentStatus.CLOSED
    assert [joined_text(events, 1), joined_text(events, 2)] == recorded_texts(agent)
    assert "".join(joined_text(events, s) for s in (1, 2)) == "".join(pieces)
    # What the reader had not taken comes as one piece per step, not 300 events.
    assert [type(e).__name__ for e in normalized(events)] == [
        "TurnText", "TurnToolCall", "TurnToolResult", "TurnStepEnd",
        "TurnText", "TurnStepEnd", "TurnEnd",
    ]  # fmt: skip
    assert len(events) <= 8


async def test_pieces_a_lagging_reader_has_not_taken_are_held_for_the_step_only() -> None:
    model = ScriptedModel([ScriptedStep((*(TextDelta(f"{i},") for i in range(50)), HOLD))])
    async with open_agent(model) as agent, agent.stream("go") as turn:
        await trio.testing.wait_all_tasks_blocked()
        # The step streamed 50 pieces while nobody read: held once each, as one text.
        assert len(turn._live) == 50  # pyright: ignore[reportPrivateUsage]
        assert await turn.__anext__() == TurnText(1, "".join(f"{i}," for i in range(50)))
        assert turn._live == []  # pyright: ignore[reportPrivateUsage]
        agent.cancel()
        assert [type(e) for e in await follow(turn)] == [TurnStepEnd, TurnEnd]


async def test_V1_a_prompt_queued_behind_other_prompts_streams_its_own_turn_only() -> None:
    model = ScriptedModel(
        [
            reply("first answer", hold=True),
            reply("second answer", chunks=3),
            reply("third answer", chunks=2),
        ]
    )
    async with open_agent(model) as agent:
        agent.send("first")
        await trio.testing.wait_all_tasks_blocked()
        agent.send("second")
        async with agent.stream("third") as turn:
            assert turn.turn is None  # queued: no turn yet
            async with trio.open_nursery() as nursery:
                events: list[TurnEvent] = []

                async def read() -> None:
                    events.extend(await follow(turn))

                nursery.start_soon(read)
                await trio.testing.wait_all_tasks_blocked()
                assert events == []
                model.release()
            result = await turn.result()
    assert normalized(events) == [
        TurnText(1, "third answer"),
        TurnStepEnd(1),
        TurnEnd(3, {"kind": "completed"}),
    ]
    assert (result.turn, result.prompt_id, result.text) == (3, "m3", "third answer")


async def test_V1_two_agents_on_one_bus_each_stream_their_own_turn() -> None:
    bus = EventBus()
    first = ScriptedModel([reply("alpha beta gamma", chunks=3)])
    second = ScriptedModel([reply("one two three", chunks=3)])
    texts: dict[str, list[TurnEvent]] = {}
    async with (
        open_agent(first, events=bus) as a,
        open_agent(second, events=bus) as b,
        trio.open_nursery() as nursery,
    ):

        async def read(agent: Agent, prompt: str) -> None:
            async with agent.stream(prompt) as turn:
                texts[prompt] = await follow(turn)

        # Both turns are turn 1, step 1: only the agent tells their text apart.
        nursery.start_soon(read, a, "to a")
        nursery.start_soon(read, b, "to b")
    assert joined_text(texts["to a"], 1) == "alpha beta gamma"
    assert joined_text(texts["to b"], 1) == "one two three"


@pytest.mark.parametrize("queued_behind", [True, False])
async def test_a_prompt_dropped_before_its_turn_gives_one_turn_dropped(
    queued_behind: bool,
) -> None:
    model = ScriptedModel([reply("first", hold=True)] if queued_behind else [])
    async with open_agent(model) as agent:
        if queued_behind:
            agent.send("first")
            await trio.testing.wait_all_tasks_blocked()
        async with agent.stream("second") as turn:
            # Before the loop took it (sent from idle) or while it waited (queued behind).
            assert agent.cancel()
            assert await follow(turn) == [TurnDropped(turn.prompt_id, "cancelled")]
            with pytest.raises(TurnNotFoundError, match="dropped \\(cancelled\\)"):
                await turn.result()


async def test_a_close_mid_turn_ends_the_stream_with_the_closed_turns_end() -> None:
    gate = GateTool()
    model = ScriptedModel([ScriptedStep((ToolCall("c1", "gate", {}), Finish("tool_calls")))])
    events: list[TurnEvent] = []
    async with trio.open_nursery() as nursery, open_agent(model, tools=[gate]) as agent:

        async def read() -> None:
            async with agent.stream("go") as turn:
                events.extend(await follow(turn))

        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        assert gate.held == 1
        # Leaving open_agent closed the agent while its tool ran.
    assert events == [
        TurnToolCall(1, "c1", "gate", {}),
        TurnToolResult(1, "c1", "gate", events[1].content, True),  # type: ignore[union-attr]
        TurnStepEnd(1),
        TurnEnd(1, {"kind": "closed"}),
    ]


async def test_leaving_the_block_stops_following_and_does_not_cancel_the_turn() -> None:
    model = ScriptedModel([ScriptedStep((TextDelta("a long "), HOLD, TextDelta("answer")))])
    async with open_agent(model) as agent:
        async with agent.stream("go") as turn:
            async for _ in turn:
                break
        # Left: nothing more to read, and a result only once the records hold the end.
        assert [e async for e in turn] == []
        with pytest.raises(TurnNotFoundError, match="has not ended"):
            await turn.result()
        model.release()
        await agent.wait_idle()
        assert (await turn.result()).end == {"kind": "completed"}
        assert (await turn.result()).text == "a long answer"
    assert turn._stop == []  # pyright: ignore[reportPrivateUsage]


class Broken:
    """A model whose call fails after some text: the turn ends `error`."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        await trio.lowlevel.checkpoint()
        yield TextDelta("partly ")
        raise ValueError("the model fell over")


async def test_a_failed_turn_ends_the_stream_with_its_error_end() -> None:
    async with open_agent(Broken()) as agent:
        async with agent.stream("go") as turn:
            events = normalized(await follow(turn))
        result = await turn.result()
    reason: TurnEndReason = {"kind": "error", "message": "ValueError: the model fell over"}
    assert events == [TurnText(1, "partly "), TurnStepEnd(1), TurnEnd(1, reason)]
    assert (result.end, result.text, result.usage) == (reason, "partly ", None)


async def test_V2_a_loop_stopped_by_a_persistence_error_ends_the_streams_it_leaves() -> None:
    # The store fails on the first turn's end: the loop stops there, with the second
    # prompt still queued. The first turn's end is in the session (not durable); the
    # second prompt never gets a turn.
    session = Session("s")

    def failing_store(record: Record) -> None:
        if record.type == "turn/end":
            raise OSError("disk full")

    session.observe(failing_store)
    model = ScriptedModel([reply("done", hold=True)])
    agent = Agent(session=session, model=model)

    async def loop() -> None:
        with pytest.raises(PersistenceError):
            await agent.run()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop)
        first = agent.stream("one")
        second = agent.stream("two")
        async with first, second:
            await trio.testing.wait_all_tasks_blocked()
            model.release()
            assert normalized(await follow(first)) == [
                TurnText(1, "done"),
                TurnStepEnd(1),
                TurnEnd(1, {"kind": "completed"}),
            ]
            assert (await first.result()).text == "done"
            assert await follow(second) == []
            with pytest.raises(TurnNotFoundError, match="stopped before the turn of prompt"):
                await second.result()
    assert agent.status is AgentStatus.CLOSED


async def test_entering_raises_what_send_raises_and_follows_nothing() -> None:
    async with open_agent(ScriptedModel()) as agent:
        with pytest.raises(TypeError, match="takes a str"):
            async with agent.stream(42):  # type: ignore[arg-type]
                pass
        assert agent.session.records == ()
    stream = agent.stream("late")
    with pytest.raises(AgentClosedError, match="cannot send"):
        await stream.__aenter__()
    assert stream._stop == []  # pyright: ignore[reportPrivateUsage]
    with pytest.raises(RuntimeError, match="sent on entering"):
        _ = stream.prompt_id


@pytest.mark.subprocess
def test_the_example_program_streams_a_turn() -> None:
    # The checkout's code, whatever else the inherited PYTHONPATH holds.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "stream_a_turn.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "[calling word_count with {'text': 'the quick brown fox'}]" in result.stdout
    assert "The text has 4 words." in result.stdout
    assert "[turn ended: completed]" in result.stdout
    assert "usage: Usage(input_tokens=55, output_tokens=14)" in result.stdout
