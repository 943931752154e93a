"""The types of the conformance targets (`agent_conformance.AgentSurface` and co.): the
built-in implementations and the third-party example satisfy them, statically (mypy and
pyright check the assignments below) and at run time."""

from __future__ import annotations

import pytest

from agent_conformance import (
    AgentFactory,
    AgentSurface,
    RuntimeFactory,
    RuntimeSurface,
    ShellFactory,
)
from agent_conformance._agent_machine import builtin_agent_factory
from agent_conformance._lifecycle_machine import builtin_runtime_factory
from agent_conformance._shell_machine import builtin_shell_factory
from examples.observed_loop import factory as loop_factory
from examples.observed_trio_agents import factory as observed_factory
from examples.third_party_agent import factory as third_party_factory
from trio_agents import AgentOptions, EventBus, MemoryStore, ShellExecutor, open_agent
from trio_agents import open_runtime as builtin_open_runtime
from trio_agents.testing import ScriptedModel

AGENT_FACTORIES: dict[str, AgentFactory] = {
    "builtin": builtin_agent_factory,
    "third party": third_party_factory,
    "observed": observed_factory,
    "observed loop": loop_factory,
}
RUNTIME_FACTORIES: dict[str, RuntimeFactory] = {
    "builtin": builtin_runtime_factory,
    "open_runtime": builtin_open_runtime,
}
SHELL_FACTORY: ShellFactory = builtin_shell_factory


@pytest.mark.parametrize("name", sorted(AGENT_FACTORIES))
async def test_each_agent_factory_yields_an_agent_surface(name: str) -> None:
    factory = AGENT_FACTORIES[name]
    async with factory(ScriptedModel(), [], EventBus(), AgentOptions()) as agent:
        assert isinstance(agent, AgentSurface)


async def test_open_agent_yields_an_agent_surface() -> None:
    async with open_agent(ScriptedModel()) as agent:
        surface: AgentSurface = agent
        assert isinstance(surface, AgentSurface)


@pytest.mark.parametrize("name", sorted(RUNTIME_FACTORIES))
async def test_each_runtime_factory_yields_a_runtime_surface(name: str) -> None:
    async with RUNTIME_FACTORIES[name](MemoryStore()) as rt:
        assert isinstance(rt, RuntimeSurface)
        assert not isinstance(rt, AgentSurface)


def test_the_shell_factory_makes_an_executor_with_the_given_cwd() -> None:
    executor = SHELL_FACTORY("/tmp")
    assert isinstance(executor, ShellExecutor)
    assert executor.cwd == "/tmp"


def test_an_object_without_wait_idle_is_no_agent_surface() -> None:
    class NoWaitIdle:
        id = "x"
        session = None
        status = None

        def send(self, content: str) -> str:
            return content

        steer = inject = send

        def cancel(self, reason: str, *, cause: str) -> bool:
            return False

    assert not isinstance(NoWaitIdle(), AgentSurface)
