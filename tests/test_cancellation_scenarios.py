"""Cancellation at every point of a turn (rules A5-A8 of docs/contract.md), scenario by scenario.

Each test is named after its window or scenario. A cancel is landed at an exact point either
from a synchronous listener (which runs inside the driver, at that point) or while the model
or a tool is held at a gate.
"""

from __future__ import annotations

import trio
import trio.testing

from trio_agents import (
    AgentStatus,
    CancelRequested,
    Event,
    EventBus,
    Finish,
    StatusChanged,
    StepStarted,
    TextDelta,
    TurnStarted,
    open_agent,
)
from trio_agents.testing import HOLD, GateTool, ScriptedModel, ScriptedStep, reply, tool_step

from .support.helpers import Recorder, delivered, of_type, turn_ends, types

ABORTED_USER = {"kind": "aborted", "reason": "cancelled", "cause": "user"}


async def test_cancel_before_claim() -> None:
    # send wakes the driver but it has not run yet: the prompt is dropped, no turn opens.
    bus = EventBus()
    seen = Recorder(bus)
    model = ScriptedModel()
    async with open_agent(model, events=bus) as agent:
        agent.send("never")
        assert agent.cancel() is True
        await agent.wait_idle()
        assert agent.session.records == ()
        assert model.requests == []
        assert [e for e in seen.events if isinstance(e, StatusChanged)] == [
            StatusChanged(agent.id, AgentStatus.RUNNING),
            StatusChanged(agent.id, AgentStatus.IDLE),
        ]


async def test_cancel_in_pre_step_window() -> None:
    bus = EventBus()
    model = ScriptedModel()
    async with open_agent(model, events=bus) as agent:
        bus.connect(lambda e: agent.cancel() if isinstance(e, TurnStarted) else None)
        agent.send("x")
        await agent.wait_idle()
        assert types(agent) == ["turn/start", "user/message", "turn/end"]
        assert turn_ends(agent) == [ABORTED_USER]
        assert model.requests == []


async def test_cancel_after_step_start_makes_no_model_call() -> None:
    bus = EventBus()
    model = ScriptedModel()
    async with open_agent(model, events=bus) as agent:
        bus.connect(lambda e: agent.cancel() if isinstance(e, StepStarted) else None)
        agent.send("x")
        await agent.wait_idle()
        assert model.requests == []
        assert types(agent) == ["turn/start", "user/message", "step/start", "step/end", "turn/end"]


async def test_cancel_mid_model_stream() -> None:
    step = ScriptedStep(
        (TextDelta("Hello, "), TextDelta("wor"), HOLD, TextDelta("ld"), Finish("stop"))
    )
    model = ScriptedModel([step])
    async with open_agent(model) as agent:
        agent.send("greet")
        await trio.testing.wait_all_tasks_blocked()
        assert model.held == 1
        agent.cancel()
        await agent.wait_idle()
        # The partly streamed reply is kept and marked, before step/end and turn/end.
        assert of_type(agent, "assistant/message") == [
            {"content": "Hello, wor", "interrupted": True}
        ]
        assert types(agent)[-3:] == ["assistant/message", "step/end", "turn/end"]
        assert turn_ends(agent) == [ABORTED_USER]
        agent.send("again")
        await agent.wait_idle()
        # The next request replays what the user saw.
        assert [m.content for m in model.requests[1].messages if m.role == "assistant"] == [
            "Hello, wor"
        ]


async def test_cancel_before_any_text_records_no_reply() -> None:
    model = ScriptedModel([reply("x", hold=True)])
    async with open_agent(model) as agent:
        agent.send("q")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        await agent.wait_idle()
        assert of_type(agent, "assistant/message") == []


async def test_cancel_mid_tool_call() -> None:
    gate = GateTool()
    model = ScriptedModel([tool_step(("gate", {}), ("echo", {"text": "quick"}))])
    from trio_agents.testing import EchoTool

    async with open_agent(model, tools=[gate, EchoTool()]) as agent:
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        assert gate.held == 1
        agent.cancel()
        await agent.wait_idle()
        results = {d["call_id"]: d for d in of_type(agent, "tool/result")}
        calls = of_type(agent, "tool/call")
        assert len(results) == len(calls) == 2
        by_name = {c["name"]: results[c["call_id"]] for c in calls}
        assert by_name["echo"] == {
            "call_id": by_name["echo"]["call_id"],
            "content": "quick",
            "is_error": False,
        }
        assert by_name["gate"]["interrupted"] is True
        assert gate.cancelled == 1
        assert len(model.requests) == 1
        assert turn_ends(agent) == [ABORTED_USER]


async def test_cancel_in_continuation_window() -> None:
    gate = GateTool()
    model = ScriptedModel([tool_step(("gate", {})), reply("never")])
    async with open_agent(model, tools=[gate]) as agent:
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        gate.release()  # the tool finishes; the driver is between steps when we cancel
        agent.cancel()
        await agent.wait_idle()
        assert len(model.requests) == 1
        assert of_type(agent, "tool/result")[0]["content"] == "done"
        assert types(agent).count("step/start") == 1
        assert turn_ends(agent) == [ABORTED_USER]


async def test_cancel_from_synchronous_status_listener() -> None:
    bus = EventBus()
    model = ScriptedModel()
    async with open_agent(model, events=bus) as agent:

        def on_status(event: Event) -> None:
            if event == StatusChanged(agent.id, AgentStatus.RUNNING):
                agent.cancel()

        bus.connect(on_status)
        agent.send("x")
        await agent.wait_idle()
        assert agent.session.records == ()
        assert model.requests == []
        assert agent.status is AgentStatus.IDLE


async def test_status_listener_cancels_and_sends_replacement_runs_alone() -> None:
    # spec 6.1 #26: A never opens a turn; B runs alone.
    bus = EventBus()
    model = ScriptedModel()
    async with open_agent(model, events=bus) as agent:
        fired: list[bool] = []

        def on_status(event: Event) -> None:
            if event == StatusChanged(agent.id, AgentStatus.RUNNING) and not fired:
                fired.append(True)
                agent.cancel()
                agent.send("B")

        bus.connect(on_status)
        agent.send("A")
        await agent.wait_idle()
        assert delivered(agent) == ["B"]
        assert turn_ends(agent) == [{"kind": "completed"}]


async def test_idle_noop_cancel() -> None:
    bus = EventBus()
    seen = Recorder(bus)
    async with open_agent(ScriptedModel(), events=bus) as agent:
        assert agent.cancel() is False
        assert seen.events == []
        agent.send("then")
        await agent.wait_idle()
        assert turn_ends(agent) == [{"kind": "completed"}]


async def test_cancel_then_send() -> None:
    model = ScriptedModel([reply("x", hold=True)])
    async with open_agent(model) as agent:
        agent.send("A")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        agent.send("B")
        await agent.wait_idle()
        assert delivered(agent) == ["A", "B"]
        assert turn_ends(agent) == [ABORTED_USER, {"kind": "completed"}]
        assert len(model.requests) == 2


async def test_two_sends_and_an_immediate_cancel() -> None:
    # spec 6.1 #9: nothing ran yet, both prompts are dropped.
    model = ScriptedModel()
    async with open_agent(model) as agent:
        agent.send("one")
        agent.send("two")
        agent.cancel()
        await agent.wait_idle()
        # No turn started. The second prompt queued behind the first (rule L8), so its
        # queueing and its drop are recorded: a resume must not bring it back.
        assert [(r.type, dict(r.data)) for r in agent.session.records] == [
            ("prompt/queued", {"id": "m2", "content": "two"}),
            ("prompt/dropped", {"ids": ("m2",), "reason": "cancelled"}),
        ]
        assert model.requests == []


async def test_cancel_mid_step_drops_the_queued_tail() -> None:
    # spec 6.1 #14: exactly one turn/end aborted; the tail never runs; one request.
    model = ScriptedModel([reply("x", hold=True)])
    async with open_agent(model) as agent:
        agent.send("head")
        await trio.testing.wait_all_tasks_blocked()
        agent.send("tail 1")
        agent.send("tail 2")
        agent.cancel()
        await agent.wait_idle()
        assert turn_ends(agent) == [ABORTED_USER]
        assert len(model.requests) == 1


async def test_steer_then_cancel_drops_the_steering() -> None:
    # spec 6.1 #28: not re-enqueued as a new turn.
    model = ScriptedModel([reply("x", hold=True)])
    async with open_agent(model) as agent:
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        agent.steer("s")
        agent.cancel()
        await agent.wait_idle()
        assert types(agent).count("turn/start") == 1


async def test_first_cause_wins_parent_then_user() -> None:
    # spec 6.1 #30 and #31: a later cancel, or the close, never rewrites the first cause.
    model = ScriptedModel([reply("x", hold=True)])
    async with open_agent(model) as agent:
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel("by parent", cause="parent")
        agent.send("queued after")
        assert agent.cancel("by user", cause="user") is True  # it drops the queued prompt
    assert turn_ends(agent) == [{"kind": "aborted", "reason": "by parent", "cause": "parent"}]


async def test_cancel_requested_listener_sees_the_work_it_cancels() -> None:
    bus = EventBus()
    model = ScriptedModel([reply("x", hold=True)])
    async with open_agent(model, events=bus) as agent:
        seen: list[int] = []
        bus.connect(
            lambda e: seen.append(len(agent.pending)) if isinstance(e, CancelRequested) else None
        )
        agent.send("a")
        await trio.testing.wait_all_tasks_blocked()
        agent.send("b")
        agent.cancel()
        assert seen == [1]
