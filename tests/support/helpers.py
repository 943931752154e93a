"""Small assertions over session records, shared by the tests."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from trio_agents import (
    Agent,
    BashTools,
    Event,
    EventBus,
    MemoryStore,
    Runtime,
    SandboxPolicy,
    ShellExecutor,
    open_runtime,
)


def types(agent: Agent) -> list[str]:
    return [record.type for record in agent.session.records]


def of_type(agent: Agent, type: str) -> list[Mapping[str, Any]]:
    return [record.data for record in agent.session.records if record.type == type]


def turn_ends(agent: Agent) -> list[Mapping[str, str]]:
    return [data["reason"] for data in of_type(agent, "turn/end")]


def delivered(agent: Agent) -> list[str]:
    """Contents of prompts delivered to turns, in order."""
    return [str(data["content"]) for data in of_type(agent, "user/message")]


class Recorder:
    """Collects every event of a bus, for ordering assertions."""

    def __init__(self, bus: EventBus) -> None:
        self.events: list[Event] = []
        bus.connect(self.events.append)

    def names(self) -> list[str]:
        return [type(event).__name__ for event in self.events]


@asynccontextmanager
async def bash_runtime(
    grace: float = 0.5, cwd: pathlib.Path | None = None, sandbox: SandboxPolicy | None = None
) -> AsyncGenerator[tuple[Runtime, BashTools], None]:
    """A runtime over a MemoryStore with `BashTools` loaded; a short kill grace. `cwd` is
    the commands' workdir: the one place a sandboxed command may write, so a test's FIFOs
    go there. `sandbox`: the policy (None: the default one)."""
    shell = ShellExecutor(
        grace=grace, cwd=None if cwd is None else str(cwd), sandbox=sandbox or SandboxPolicy()
    )
    async with open_runtime(MemoryStore(), shell=shell) as rt:
        bash = BashTools()
        await rt.load(bash)
        yield rt, bash


def all_tasks() -> int:
    """How many tasks the current trio run has, counted from the root task."""

    def count(task: trio.lowlevel.Task) -> int:
        return 1 + sum(count(t) for n in task.child_nurseries for t in n.child_tasks)

    root = trio.lowlevel.current_root_task()
    assert root is not None
    return count(root)
