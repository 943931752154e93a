"""History is always valid (acceptance 4): every tool/call has exactly one tool/result, also
when a turn is cancelled at any point of a multi-step, multi-tool turn."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agent_conformance._history import history_problems
from trio_agents import Record, open_agent
from trio_agents.testing import EchoTool, GateTool, ScriptedModel, reply, tool_step

from .support.helpers import of_type


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            tool_step(("gate", {}), ("echo", {"text": "a"}), text="thinking", hold=True),
            tool_step(("gate", {}), ("gate", {}), hold=True),
            reply("final answer", hold=True, chunks=3),
        ]
    )


@pytest.mark.parametrize("cancel_after", range(7))
async def test_every_tool_call_has_exactly_one_result_whenever_the_cancel_lands(
    cancel_after: int,
) -> None:
    gate = GateTool()
    model = script()
    async with open_agent(model, tools=[gate, EchoTool()]) as agent:
        agent.send("go")
        for _ in range(cancel_after):
            await trio.testing.wait_all_tasks_blocked()
            if model.held:
                model.release()
            elif gate.held:
                gate.release()
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        await agent.wait_idle()
        records = agent.session.records
        assert history_problems(records, allow_open_turn=False) == []
        calls = [d["call_id"] for d in of_type(agent, "tool/call")]
        results = [d["call_id"] for d in of_type(agent, "tool/result")]
        assert sorted(calls) == sorted(results)
        assert len(set(results)) == len(results)


async def test_a_completed_multi_step_turn_is_valid_and_replays_to_the_model() -> None:
    gate = GateTool()
    model = script()
    async with open_agent(model, tools=[gate, EchoTool()]) as agent:
        agent.send("go")
        while True:
            await trio.testing.wait_all_tasks_blocked()
            if model.held:
                model.release()
            elif gate.held:
                gate.release()
            else:
                break
        await agent.wait_idle()
        assert history_problems(agent.session.records, allow_open_turn=False) == []
        third = model.requests[2].messages
        roles = [m.role for m in third]
        assert roles == ["user", "assistant", "tool", "tool", "assistant", "tool", "tool"]
        assert [c.name for c in third[1].tool_calls] == ["gate", "echo"]


def test_history_problems_reports_a_dangling_call_and_an_unbalanced_turn() -> None:
    records = [
        Record.of("turn/start", {"turn": 1}),
        Record.of("step/start", {"turn": 1, "step": 1}),
        Record.of("tool/call", {"call_id": "c1", "name": "x", "arguments": {}}),
        Record.of("step/end", {"turn": 1, "step": 1}),
        Record.of("turn/start", {"turn": 2}),
    ]
    problems = history_problems(records, allow_open_turn=False)
    assert problems == [
        "record 3 (step/end): tool call 'c1' has no result in its step",
        "record 4 (turn/start): turn 2 starts inside open turn 1",
        "turn 2 never ended",
    ]
