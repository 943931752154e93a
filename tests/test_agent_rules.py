"""The agent rules A1-A11 of docs/contract.md: one or more tests per rule, each named after it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from trio_agents import (
    AgentClosedError,
    AgentOptions,
    AgentStatus,
    CancelRequested,
    Event,
    EventBus,
    ModelChunk,
    ModelRequest,
    StatusChanged,
    StepEnded,
    TextDelta,
    TurnStarted,
    open_agent,
)
from trio_agents.testing import GateTool, ScriptedModel, reply, tool_step

from .support.helpers import Recorder, delivered, of_type, turn_ends, types


async def test_A1_send_from_idle_is_running_before_send_returns() -> None:
    bus = EventBus()
    seen = Recorder(bus)
    async with open_agent(ScriptedModel(), events=bus) as agent:
        assert agent.status is AgentStatus.IDLE
        agent.send("hello")
        assert agent.status is AgentStatus.RUNNING
        assert seen.events == [StatusChanged(agent.id, AgentStatus.RUNNING)]
        await agent.wait_idle()
        assert agent.status is AgentStatus.IDLE
        assert turn_ends(agent) == [{"kind": "completed"}]


async def test_A1_wait_idle_right_after_send_waits_for_that_turn() -> None:
    model = ScriptedModel([reply("slow", hold=True)])
    async with open_agent(model) as agent:
        agent.send("x")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.wait_idle)
            await trio.testing.wait_all_tasks_blocked()
            assert model.held == 1
            assert of_type(agent, "turn/end") == []
            model.release()
        assert turn_ends(agent) == [{"kind": "completed"}]


async def test_A2_burst_of_sends_is_one_turn_each_in_order() -> None:
    model = ScriptedModel()
    async with open_agent(model) as agent:
        ids = [agent.send(text) for text in ("a", "b", "c")]
        await agent.wait_idle()
        assert delivered(agent) == ["a", "b", "c"]
        assert [d["id"] for d in of_type(agent, "user/message")] == ids
        assert [d["turn"] for d in of_type(agent, "turn/start")] == [1, 2, 3]
        # Each turn holds exactly its own prompt.
        turn_of_message: list[int] = []
        turn = 0
        for record in agent.session.records:
            if record.type == "turn/start":
                turn = int(record.data["turn"])
            elif record.type == "user/message":
                turn_of_message.append(turn)
        assert turn_of_message == [1, 2, 3]
        assert len(model.requests) == 3


async def test_A2_send_during_a_turn_waits_for_the_next_turn() -> None:
    model = ScriptedModel([reply("first", hold=True)])
    async with open_agent(model) as agent:
        agent.send("one")
        await trio.testing.wait_all_tasks_blocked()
        agent.send("two")
        model.release()
        await agent.wait_idle()
        assert delivered(agent) == ["one", "two"]
        assert [m.content for m in model.requests[1].messages if m.role == "user"] == [
            "one",
            "two",
        ]
        assert len(of_type(agent, "turn/start")) == 2


async def test_A3_steer_while_running_reaches_the_next_model_call_of_the_turn() -> None:
    gate = GateTool()
    model = ScriptedModel([tool_step(("gate", {})), reply("after")])
    async with open_agent(model, tools=[gate]) as agent:
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        assert gate.held == 1
        steer_id = agent.steer("turn left")
        gate.release()
        await agent.wait_idle()
        assert len(of_type(agent, "turn/start")) == 1  # same turn
        assert of_type(agent, "steering/message") == [{"id": steer_id, "content": "turn left"}]
        second = model.requests[1].messages
        assert second[-1].content == "turn left"
        assert second[-1].source == "steering"
        # The steering record sits between step 1's end and step 2's start.
        t = types(agent)
        assert t.index("steering/message") == t.index("step/end") + 1
        assert t[t.index("steering/message") + 1] == "step/start"


async def test_A3_steering_during_a_final_step_continues_the_turn() -> None:
    model = ScriptedModel([reply("answer", hold=True), reply("to steering")])
    async with open_agent(model) as agent:
        agent.send("q")
        await trio.testing.wait_all_tasks_blocked()
        agent.steer("also this")
        model.release()
        await agent.wait_idle()
        assert len(of_type(agent, "turn/start")) == 1
        assert len(of_type(agent, "step/start")) == 2
        assert turn_ends(agent) == [{"kind": "completed"}]


async def test_A3_steer_while_idle_behaves_as_send() -> None:
    model = ScriptedModel()
    async with open_agent(model) as agent:
        mid = agent.steer("hi")
        assert agent.status is AgentStatus.RUNNING
        await agent.wait_idle()
        assert of_type(agent, "user/message") == [{"id": mid, "content": "hi"}]
        assert of_type(agent, "steering/message") == []


async def test_A3_unconsumed_steering_is_requeued_as_a_prompt_after_a_step_abort() -> None:
    model = ScriptedModel([reply("stuck", hold=True)])
    async with open_agent(model) as agent:
        agent.send("first")
        await trio.testing.wait_all_tasks_blocked()
        steer_id = agent.steer("steer me")
        assert agent._abort_step("test")  # pyright: ignore[reportPrivateUsage]
        await agent.wait_idle()
        assert turn_ends(agent) == [
            {"kind": "aborted", "reason": "test", "cause": "step"},
            {"kind": "completed"},
        ]
        assert of_type(agent, "user/message")[1] == {"id": steer_id, "content": "steer me"}


async def test_A3_unconsumed_steering_is_requeued_when_max_steps_ends_the_turn() -> None:
    gate = GateTool()
    model = ScriptedModel([tool_step(("gate", {}))])
    async with open_agent(model, tools=[gate], options=AgentOptions(max_steps=1)) as agent:
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        agent.steer("late")
        gate.release()
        await agent.wait_idle()
        assert turn_ends(agent) == [{"kind": "max_steps"}, {"kind": "completed"}]
        assert delivered(agent) == ["go", "late"]


async def test_A3_cancel_discards_steering() -> None:
    model = ScriptedModel([reply("x", hold=True)])
    async with open_agent(model) as agent:
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        agent.steer("drop me")
        assert agent.cancel()
        await agent.wait_idle()
        assert of_type(agent, "steering/message") == []
        assert delivered(agent) == ["go"]
        assert agent.pending == ()


async def test_A4_inject_while_running_rides_into_the_next_step() -> None:
    gate = GateTool()
    model = ScriptedModel([tool_step(("gate", {})), reply("done")])
    async with open_agent(model, tools=[gate]) as agent:
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        cid = agent.inject("note")
        gate.release()
        await agent.wait_idle()
        assert of_type(agent, "context/message") == [{"id": cid, "content": "note"}]
        assert model.requests[1].messages[-1].source == "context"
        assert len(of_type(agent, "turn/start")) == 1


async def test_A4_inject_while_idle_is_held_and_never_wakes() -> None:
    model = ScriptedModel()
    async with open_agent(model) as agent:
        cid = agent.inject("background")
        await trio.testing.wait_all_tasks_blocked()
        assert agent.status is AgentStatus.IDLE
        assert agent.session.records == ()
        assert model.requests == []
        assert agent.pending == ((cid, "context"),)
        agent.send("now")
        await agent.wait_idle()
        first = [m.content for m in model.requests[0].messages]
        assert first == ["now", "background"]


async def test_A4_inject_at_the_end_of_a_turn_waits_for_the_next_turn() -> None:
    model = ScriptedModel([reply("a", hold=True)])
    async with open_agent(model) as agent:
        agent.send("one")
        await trio.testing.wait_all_tasks_blocked()
        agent.inject("later")
        model.release()
        await agent.wait_idle()
        # The turn was in its last step: context does not extend it.
        assert len(of_type(agent, "step/start")) == 1
        assert agent.pending != ()
        agent.send("two")
        await agent.wait_idle()
        assert [d["content"] for d in of_type(agent, "context/message")] == ["later"]


async def test_A5_idle_cancel_is_a_silent_no_op_and_strands_nothing() -> None:
    bus = EventBus()
    seen = Recorder(bus)
    model = ScriptedModel()
    async with open_agent(model, events=bus) as agent:
        assert agent.cancel() is False
        assert agent.cancel("again", cause="parent") is False
        assert seen.events == []
        assert agent.status is AgentStatus.IDLE
        agent.send("next")
        await agent.wait_idle()
        assert turn_ends(agent) == [{"kind": "completed"}]


async def test_A5_cancel_with_only_held_context_is_a_no_op() -> None:
    async with open_agent(ScriptedModel()) as agent:
        agent.inject("ctx")
        assert agent.cancel() is False
        assert len(agent.pending) == 1


async def test_A6_effective_cancel_emits_then_clears_then_cancels() -> None:
    bus = EventBus()
    model = ScriptedModel([reply("x", hold=True)])
    observed: list[tuple[str, int, AgentStatus]] = []
    async with open_agent(model, events=bus) as agent:

        def listener(event: Event) -> None:
            if isinstance(event, CancelRequested):
                # Emitted first: the queue is still intact and the turn not yet cancelled.
                observed.append((event.reason, len(agent.pending), agent.status))
                assert not of_type(agent, "turn/end")

        bus.connect(listener)
        agent.send("a")
        await trio.testing.wait_all_tasks_blocked()
        agent.send("b")
        agent.steer("c")
        assert agent.cancel("stop it", cause="parent") is True
        assert agent.pending == ()
        await agent.wait_idle()
        assert observed == [("stop it", 2, AgentStatus.RUNNING)]
        assert turn_ends(agent) == [{"kind": "aborted", "reason": "stop it", "cause": "parent"}]


async def test_A6_cancel_rejects_an_unknown_cause() -> None:
    async with open_agent(ScriptedModel()) as agent:
        with pytest.raises(ValueError, match="'user' or 'parent'"):
            agent.cancel(cause="bogus")  # type: ignore[arg-type] # pyright: ignore[reportArgumentType]


async def test_A7_prompt_cancelled_before_its_turn_never_reaches_the_model() -> None:
    model = ScriptedModel([reply("first", hold=True)])
    async with open_agent(model) as agent:
        agent.send("one")
        await trio.testing.wait_all_tasks_blocked()
        agent.send("queued")
        agent.cancel()
        await agent.wait_idle()
        assert delivered(agent) == ["one"]
        assert len(model.requests) == 1


async def test_A7_send_after_cancel_is_an_independent_turn() -> None:
    model = ScriptedModel([reply("first", hold=True)])
    async with open_agent(model) as agent:
        agent.send("one")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        agent.send("two")
        await agent.wait_idle()
        assert turn_ends(agent) == [
            {"kind": "aborted", "reason": "cancelled", "cause": "user"},
            {"kind": "completed"},
        ]
        assert delivered(agent) == ["one", "two"]
        # The second turn's request is its own: it saw "two", never a merged batch.
        assert model.requests[1].messages[-1].content == "two"


async def test_A7_cancel_in_continuation_window_ends_without_another_model_call() -> None:
    bus = EventBus()
    model = ScriptedModel([tool_step(("echo", {"text": "x"}))])
    from trio_agents.testing import EchoTool

    async with open_agent(model, tools=[EchoTool()], events=bus) as agent:
        bus.connect(lambda e: agent.cancel() if isinstance(e, StepEnded) else None)
        agent.send("go")
        await agent.wait_idle()
        assert len(model.requests) == 1
        assert turn_ends(agent)[0]["kind"] == "aborted"


async def test_A8_cancelled_turn_has_exactly_one_turn_end_and_first_cause_wins() -> None:
    model = ScriptedModel([reply("x", hold=True)])
    async with open_agent(model) as agent:
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        assert agent.cancel("first", cause="parent") is True
        # The turn is unwinding and nothing is queued: nothing left to cancel.
        assert agent.cancel("second", cause="user") is False
        await agent.wait_idle()
        assert turn_ends(agent) == [{"kind": "aborted", "reason": "first", "cause": "parent"}]


async def test_A8_tool_calls_in_a_cancelled_turn_get_interrupted_results() -> None:
    gate = GateTool()
    model = ScriptedModel([tool_step(("gate", {}), ("gate", {}))])
    async with open_agent(model, tools=[gate]) as agent:
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        assert gate.held == 2
        agent.cancel()
        await agent.wait_idle()
        calls = [d["call_id"] for d in of_type(agent, "tool/call")]
        results = of_type(agent, "tool/result")
        assert sorted(d["call_id"] for d in results) == sorted(calls)
        assert all(d["is_error"] for d in results)
        assert all(d["interrupted"] for d in results)
        assert gate.cancelled == 2


async def test_A9_wait_idle_on_idle_agent_returns_after_a_checkpoint() -> None:
    async with open_agent(ScriptedModel()) as agent:
        with trio.testing.assert_checkpoints():
            await agent.wait_idle()


async def test_A9_wait_idle_survives_the_replacement_turn_race() -> None:
    # An idle listener that sends starts a new turn inside the settle: waiters must wait
    # for that replacement turn too.
    bus = EventBus()
    model = ScriptedModel()
    async with open_agent(model, events=bus) as agent:
        sent: list[str] = []

        def on_status(event: Event) -> None:
            if event == StatusChanged(agent.id, AgentStatus.IDLE) and not sent:
                sent.append(agent.send("replacement"))

        bus.connect(on_status)
        agent.send("first")
        await agent.wait_idle()
        assert delivered(agent) == ["first", "replacement"]
        assert agent.status is AgentStatus.IDLE


async def test_A9_wait_idle_resolves_when_a_cancel_leaves_nothing_to_run() -> None:
    model = ScriptedModel([reply("x", hold=True)])
    async with open_agent(model) as agent:
        agent.send("q")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.wait_idle)
            await trio.testing.wait_all_tasks_blocked()
            agent.cancel()
        assert agent.status is AgentStatus.IDLE


async def test_A9_wait_idle_never_raises_because_a_turn_failed() -> None:
    class Failing(ScriptedModel):
        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
            await trio.lowlevel.checkpoint()
            raise RuntimeError("model exploded")
            yield TextDelta("unreachable")

    async with open_agent(Failing()) as agent:
        agent.send("x")
        agent.send("y")
        await agent.wait_idle()
        error = {"kind": "error", "message": "RuntimeError: model exploded"}
        # A failed turn does not stop the queue: the next prompt still gets its turn.
        assert turn_ends(agent) == [error, error]


async def test_A9_wait_idle_on_a_closed_agent_waits_for_the_loop_exit() -> None:
    model = ScriptedModel([reply("x", hold=True)])
    async with trio.open_nursery() as outer:
        async with open_agent(model) as agent:
            agent.send("x")
            await trio.testing.wait_all_tasks_blocked()
            agent._begin_close()  # pyright: ignore[reportPrivateUsage]
            assert agent.status is AgentStatus.CLOSED
            done: list[bool] = []

            async def waiter() -> None:
                await agent.wait_idle()
                # The loop has exited: the closing turn/end is already recorded.
                done.append(turn_ends(agent) == [{"kind": "closed"}])

            outer.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert done == [True]


async def test_A10_delivery_to_a_closed_agent_raises_and_cancel_returns_false() -> None:
    async with open_agent(ScriptedModel()) as agent:
        pass
    assert agent.status is AgentStatus.CLOSED
    for verb in (agent.send, agent.steer, agent.inject):
        with pytest.raises(AgentClosedError, match="closed") as info:
            verb("late")
        assert isinstance(info.value, trio.ClosedResourceError)
    assert agent.cancel() is False
    await agent.wait_idle()  # returns: the loop has exited


async def test_A11_raising_listeners_cannot_break_a_turn_a_cancel_or_a_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()

    def explode(event: Event) -> None:
        raise RuntimeError(f"listener bug on {type(event).__name__}")

    bus.connect(explode)
    model = ScriptedModel([reply("a"), reply("b", hold=True)])
    with caplog.at_level(logging.ERROR, logger="trio_agents.events"):
        async with open_agent(model, events=bus) as agent:
            agent.send("one")
            await agent.wait_idle()
            agent.send("two")
            await trio.testing.wait_all_tasks_blocked()
            assert agent.cancel() is True
            await agent.wait_idle()
            assert turn_ends(agent) == [
                {"kind": "completed"},
                {"kind": "aborted", "reason": "cancelled", "cause": "user"},
            ]
    assert agent.status is AgentStatus.CLOSED
    assert any(
        "listener bug on TurnStarted" in r.getMessage() or r.exc_info for r in caplog.records
    )
    logged = {r.exc_info[1].args[0] for r in caplog.records if r.exc_info and r.exc_info[1]}
    assert {"listener bug on StatusChanged", "listener bug on CancelRequested"} <= logged


async def test_A11_a_listener_can_cancel_from_turn_start() -> None:
    bus = EventBus()
    model = ScriptedModel()
    async with open_agent(model, events=bus) as agent:
        bus.connect(lambda e: agent.cancel() if isinstance(e, TurnStarted) else None)
        agent.send("x")
        await agent.wait_idle()
        assert model.requests == []
        assert types(agent) == ["turn/start", "user/message", "turn/end"]
