"""The asyncio path and the peer adapters under examples/, with the verdict the agent machine
gives each framework (docs/conformance.md, "What it finds in other frameworks")."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

pytest.importorskip("trio_asyncio")

from trio_agents.testing import (
    AgentMachine,
    ContractViolation,
    RandomSeeder,
    ScriptedModel,
    TrioHost,
)
from trio_agents.testing._asyncio import open_asyncio_peer
from trio_agents.testing._machine import machine_for

ROOT = Path(__file__).resolve().parent.parent


def test_asyncio_timers_follow_the_machines_mock_clock() -> None:
    clock = trio.testing.MockClock()
    host = TrioHost(clock)
    woke: list[float] = []

    async def service(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with open_asyncio_peer(ScriptedModel()) as peer:

            async def sleeper() -> None:
                await asyncio.sleep(30)
                woke.append(peer.loop.time())

            peer.start(sleeper())
            task_status.started()
            await trio.sleep_forever()

    host.call(host.nursery.start, service)
    host.settle()  # at rest while the asyncio task sleeps: no real time passes
    assert woke == []
    host.run_sync(clock.jump, 30)
    host.settle()
    assert woke == [30.0]
    host.close()


async def test_the_peer_cancels_and_awaits_its_tasks_on_exit() -> None:
    model = ScriptedModel(hold_all=True)
    ended: list[str] = []

    async def held() -> None:
        try:
            async for _ in peer.model.stream(_request()):
                pass
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise

    async with open_asyncio_peer(model) as peer:
        peer.start(held())
        await trio.testing.wait_all_tasks_blocked()
        assert model.held == 1
    assert ended == ["cancelled"]
    assert model.held == 0


def _request() -> object:
    from trio_agents import AgentOptions, Message, ModelRequest

    return ModelRequest([Message("user", "hi")], [], AgentOptions())


def _run(factory: object, *steps: str) -> ContractViolation | None:
    """Drive the agent machine through `steps` (rules, as a shrunk program prints them)."""
    state = machine_for(AgentMachine, factory)()  # type: ignore[arg-type]
    try:
        state.open_agent(max_steps=None, step_timeout=None, scheduler=RandomSeeder(0))
        state.check()
        for step in steps:
            name, _, args = step.partition("(")
            kwargs = eval(f"dict({args}")
            getattr(state, name)(**kwargs)
            state.check()
    except ContractViolation as violation:
        return violation
    finally:
        state.teardown()
    return None


def test_pydantic_ai_drops_a_tool_result_when_a_cancel_lands_right_after_it() -> None:
    pytest.importorskip("pydantic_ai")
    from examples.pydantic_ai_adapter import factory

    violation = _run(
        factory,
        "send()",
        "arm(event='StepEnded')",  # cancels at the step boundary right after the tool
        "release_model(answer='tool')",
        "finish_tool()",
        "send()",
        "release_model(answer='text')",
    )
    assert violation is not None
    assert violation.property.rule == "A8"
    assert violation.property.name == "turn-end-reason"
    assert "unprocessed tool calls" in str(violation)


@pytest.mark.subprocess
@pytest.mark.parametrize("script", ["pydantic_ai_cancel_after_tool.py"])
def test_the_finding_holds_against_the_framework_alone(script: str) -> None:
    pytest.importorskip("pydantic_ai")
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "findings" / script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
