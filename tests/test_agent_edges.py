"""Edge cases found in review, each pinned: step aborts a tool absorbs, duplicate call ids,
no tool after a cancel, swallowed outer cancellation, self-close, event order, re-entrant
cancel, frozen history, and persistence failures that must not pass silently."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import trio
import trio.testing

from agent_conformance._history import history_problems
from trio_agents import (
    Agent,
    AgentHandle,
    AgentOptions,
    AgentStatus,
    CancelRequested,
    Event,
    EventBus,
    Finish,
    MemoryStore,
    ModelChunk,
    ModelRequest,
    PersistenceError,
    Record,
    StatusChanged,
    TextDelta,
    TextStreamed,
    ToolCall,
    ToolContext,
    TurnEnded,
    open_agent,
    open_runtime,
)
from trio_agents.testing import EchoTool, GateTool, ScriptedModel, reply, tool_step

from .support.helpers import delivered, of_type, turn_ends

STEP_TIMEOUT = {"kind": "aborted", "reason": "step-timeout", "cause": "timeout"}


class Cooperative(GateTool):
    """Catches its cancellation and returns a partial result, as a polite tool may."""

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            return "partial result"
        raise AssertionError("unreachable")


async def test_a_step_timeout_a_tool_absorbs_still_ends_the_turn() -> None:
    model = ScriptedModel([tool_step(("gate", {})), reply("must not be asked")])
    async with open_agent(model, tools=[Cooperative()], options=AgentOptions(step_timeout=5)) as a:
        a.send("go")
        await a.wait_idle()
        assert turn_ends(a) == [STEP_TIMEOUT]
        assert len(model.requests) == 1
        assert of_type(a, "tool/result")[0]["content"] == "partial result"


@pytest.mark.realtime
async def test_a_step_timeout_during_a_worker_thread_tool_ends_the_turn() -> None:
    class Blocking(GateTool):
        async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
            await trio.to_thread.run_sync(time.sleep, 0.3)  # the subject: uncancellable work
            return "slept"

    model = ScriptedModel([tool_step(("gate", {})), reply("must not be asked")])
    async with open_agent(model, tools=[Blocking()], options=AgentOptions(step_timeout=0.05)) as a:
        a.send("go")
        await a.wait_idle()
        assert turn_ends(a) == [STEP_TIMEOUT]
        assert len(model.requests) == 1


async def test_duplicate_or_empty_call_ids_are_made_unique_and_all_answered() -> None:
    model = ScriptedModel(
        [
            tool_step(ToolCall("", "echo", {"text": "a"}), ToolCall("", "echo", {"text": "b"})),
            reply("ok"),
        ]
    )
    async with open_agent(model, tools=[EchoTool()]) as agent:
        agent.send("go")
        await agent.wait_idle()
        ids = [d["call_id"] for d in of_type(agent, "tool/call")]
        assert len(set(ids)) == 2
        assert all(ids)
        assert sorted(d["call_id"] for d in of_type(agent, "tool/result")) == sorted(ids)
        assert history_problems(agent.session.records, allow_open_turn=False) == []
        assert turn_ends(agent) == [{"kind": "completed"}]


class Burst:
    """A model that yields a whole reply without a checkpoint in between (a non-streaming
    adapter does this)."""

    def __init__(self, chunks: list[ModelChunk]) -> None:
        self.chunks = chunks

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        await trio.lowlevel.checkpoint()
        for chunk in self.chunks:
            yield chunk


async def test_no_tool_starts_once_the_turn_was_cancelled_during_the_stream() -> None:
    bus = EventBus()
    ran: list[str] = []

    class SideEffect(EchoTool):
        name = "rm"

        async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
            ran.append("side effect")
            await trio.lowlevel.checkpoint()
            return "done"

    model = Burst([TextDelta("deleting"), ToolCall("c1", "rm", {}), Finish("tool_calls")])
    async with open_agent(model, tools=[SideEffect()], events=bus) as agent:
        bus.connect(lambda e: agent.cancel() if isinstance(e, TextStreamed) else None)
        agent.send("go")
        await agent.wait_idle()
        assert ran == []
        assert of_type(agent, "tool/result")[0]["interrupted"] is True
        assert turn_ends(agent)[0]["kind"] == "aborted"


async def test_an_outer_cancellation_a_model_turns_into_an_error_is_a_close() -> None:
    class Rude:
        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                raise RuntimeError("connection aborted") from None
            yield TextDelta("unreachable")

    agents: list[Agent] = []
    with trio.move_on_after(5):
        async with open_agent(Rude()) as agent:
            agents.append(agent)
            agent.send("a")
            agent.send("b")
            await trio.sleep_forever()
    agent = agents[0]
    # Turn 1 was closed (not an error), and "b" never got a turn of its own.
    assert turn_ends(agent) == [{"kind": "closed"}]
    assert delivered(agent) == ["a"]


async def test_a_tool_can_close_its_own_agent_without_waiting_out_the_grace() -> None:
    handles: list[AgentHandle] = []

    class Quit(EchoTool):
        name = "quit"

        async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
            await handles[0].aclose()
            await trio.sleep_forever()  # cancelled: the turn is closing
            raise AssertionError("unreachable")

    async with open_runtime(MemoryStore()) as rt:
        handle = await rt.agents.create(
            model=ScriptedModel([tool_step(("quit", {}))]),
            tools=[Quit()],
            options=AgentOptions(close_grace=60),
        )
        handles.append(handle)
        start = trio.current_time()
        handle.agent.send("please quit")
        await handle.agent.wait_idle()
        await handle.aclose()
        assert trio.current_time() - start < 1
        assert turn_ends(handle.agent) == [{"kind": "closed"}]
        assert rt.agents.get(handle.agent.id) is None


async def test_every_listener_sees_events_in_the_order_they_happened() -> None:
    bus = EventBus()
    second: list[AgentStatus] = []
    async with open_agent(ScriptedModel(), events=bus) as agent:
        sent: list[bool] = []

        def follow_up(event: Event) -> None:
            if event == StatusChanged(agent.id, AgentStatus.IDLE) and not sent:
                sent.append(True)
                agent.send("follow-up")

        bus.connect(follow_up)
        bus.connect(lambda e: second.append(e.status) if isinstance(e, StatusChanged) else None)
        agent.send("first")
        await agent.wait_idle()
    running, idle, closed = AgentStatus.RUNNING, AgentStatus.IDLE, AgentStatus.CLOSED
    assert second == [running, idle, running, idle, closed]


async def test_a_cancel_from_a_cancel_requested_listener_cannot_replace_the_first_cause() -> None:
    bus = EventBus()
    model = ScriptedModel([reply("x", hold=True)])
    nested: list[bool] = []
    async with open_agent(model, events=bus) as agent:

        def escalate(event: Event) -> None:
            if isinstance(event, CancelRequested) and not nested:
                nested.append(agent.cancel("escalated", cause="parent"))
                agent.send("sent from the listener")

        bus.connect(escalate)
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        assert agent.cancel("first", cause="user") is True
        await agent.wait_idle()
    assert nested == [False]
    assert turn_ends(agent)[0] == {"kind": "aborted", "reason": "first", "cause": "user"}
    # The listener's send came after the cancel: it was not dropped by it.
    assert delivered(agent) == ["go", "sent from the listener"]


async def test_history_is_frozen_against_tools_and_listeners() -> None:
    bus = EventBus()

    class Consuming(EchoTool):
        async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
            assert isinstance(arguments, dict)
            arguments.pop("token")  # its own copy
            await trio.lowlevel.checkpoint()
            return "ok"

    tampered: list[str] = []

    def tamper(event: Event) -> None:
        if isinstance(event, TurnEnded):
            try:
                event.reason["kind"] = "tampered"  # type: ignore[index]
            except TypeError:
                tampered.append("refused")

    bus.connect(tamper)
    model = ScriptedModel([tool_step(("echo", {"token": "t", "nested": {"a": [1]}})), reply("ok")])
    async with open_agent(model, tools=[Consuming()], events=bus) as agent:
        agent.send("go")
        await agent.wait_idle()
        call = of_type(agent, "tool/call")[0]
        assert call["arguments"]["token"] == "t"
        with pytest.raises(TypeError):
            call["arguments"]["nested"]["a"] = 2
        assert tampered == ["refused"]
        assert turn_ends(agent) == [{"kind": "completed"}]
        assert Record.of("x", {"l": [1, {"b": 2}]}).to_json() == {
            "type": "x",
            "data": {"l": [1, {"b": 2}]},
        }


async def test_a_failing_persistence_observer_stops_the_loop_instead_of_passing_silently() -> None:
    def observer(record: Record) -> None:
        if record.type == "tool/result":
            raise OSError("disk full")

    async def run() -> None:
        model = ScriptedModel([tool_step(("echo", {"text": "x"}))])
        async with open_agent(model, tools=[EchoTool()]) as agent:
            agent.session.observe(observer)
            agent.send("go")
            await agent.wait_idle()

    # It propagates (through the agent's nurseries) instead of becoming a failed turn.
    with pytest.RaisesGroup(
        pytest.RaisesExc(PersistenceError, match=r"observer .* failed on record 5 \(tool/result\)"),
        flatten_subgroups=True,
    ):
        await run()
