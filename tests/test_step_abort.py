"""Step abort: the step's private cancel scope, driven by `step_timeout` (acceptance 3)."""

from __future__ import annotations

import trio
import trio.testing

from trio_agents import AgentOptions, open_agent
from trio_agents.testing import GateTool, ScriptedModel, reply, tool_step

from .support.helpers import delivered, of_type, turn_ends, types

STEP_TIMEOUT = {"kind": "aborted", "reason": "step-timeout", "cause": "timeout"}


async def test_step_timeout_ends_the_turn_aborted_with_step_timeout() -> None:
    model = ScriptedModel([reply("never released", hold=True)])
    async with open_agent(model, options=AgentOptions(step_timeout=30)) as agent:
        start = trio.current_time()
        agent.send("slow")
        await agent.wait_idle()
        assert trio.current_time() - start == 30  # virtual time: exactly the deadline
        assert turn_ends(agent) == [STEP_TIMEOUT]
        assert types(agent)[-2:] == ["step/end", "turn/end"]


async def test_queued_prompts_and_steering_survive_a_step_timeout_and_run_afterwards() -> None:
    model = ScriptedModel([reply("stuck", hold=True)])
    async with open_agent(model, options=AgentOptions(step_timeout=10)) as agent:
        agent.send("first")
        await trio.testing.wait_all_tasks_blocked()
        steer_id = agent.steer("steering")
        agent.send("second")
        await agent.wait_idle()
        # Steering is re-queued ahead of the queued prompt; both run as their own turns.
        assert delivered(agent) == ["first", "steering", "second"]
        assert turn_ends(agent) == [STEP_TIMEOUT, {"kind": "completed"}, {"kind": "completed"}]
        assert of_type(agent, "user/message")[1]["id"] == steer_id


async def test_step_timeout_interrupts_a_tool_and_balances_history() -> None:
    gate = GateTool()
    model = ScriptedModel([tool_step(("gate", {}))])
    async with open_agent(model, tools=[gate], options=AgentOptions(step_timeout=5)) as agent:
        agent.send("go")
        await agent.wait_idle()
        results = of_type(agent, "tool/result")
        assert len(results) == len(of_type(agent, "tool/call")) == 1
        assert results[0]["interrupted"] is True
        assert turn_ends(agent) == [STEP_TIMEOUT]


async def test_each_step_gets_its_own_deadline() -> None:
    # Three steps of 4 virtual seconds each under a 5 s step timeout: no step times out.
    class Slow(GateTool):
        async def __call__(self, arguments, context):  # type: ignore[no-untyped-def] # pyright: ignore
            await trio.sleep(4)
            return "ok"

    model = ScriptedModel([tool_step(("gate", {})), tool_step(("gate", {})), reply("done")])
    async with open_agent(model, tools=[Slow()], options=AgentOptions(step_timeout=5)) as agent:
        agent.send("go")
        await agent.wait_idle()
        assert turn_ends(agent) == [{"kind": "completed"}]
        assert types(agent).count("step/start") == 3


async def test_a_cancel_during_a_step_is_a_cancel_not_a_step_abort() -> None:
    model = ScriptedModel([reply("x", hold=True)])
    async with open_agent(model, options=AgentOptions(step_timeout=100)) as agent:
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel("user stop")
        await agent.wait_idle()
        assert turn_ends(agent) == [{"kind": "aborted", "reason": "user stop", "cause": "user"}]
