"""Rule L7 in one process: a step's tools start only once its calls are committed, a cancel
during that commit starts none, and a store that cannot commit stops the loop before any
tool runs. The SIGKILL side is tests/test_durability_kills.py's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

from trio_agents import (
    MemoryStore,
    PersistenceError,
    Session,
    StoreBrokenError,
    ToolContext,
    open_agent,
)
from trio_agents.testing import ScriptedModel, tool_step


class GatedCommits(MemoryStore):
    """Stores records at once, but counts them committed only through `flush`, which waits
    while `gate` is closed (or raises, once `broken`)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: trio.Event | None = None
        self.commits = 0
        self.broken = False
        self._done: dict[str, int] = {}

    def _committed_all(self, session: Session) -> bool:
        return self._done.get(session.id, 0) >= len(session)

    async def flush(self, session: Session) -> None:
        target = len(session)
        self.commits += 1
        if self.broken:
            await trio.lowlevel.checkpoint()
            raise StoreBrokenError("the disk is full")
        if self.gate is not None:
            await self.gate.wait()
        else:
            await trio.lowlevel.checkpoint()
        self._done[session.id] = max(self._done.get(session.id, 0), target)


class Probe:
    name = "probe"
    description = "counts its calls"
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        return "ran"


def live(store: MemoryStore) -> Session:
    session = Session("s")
    store.enter(session)
    return session


async def test_the_tools_of_a_step_start_after_one_commit_of_its_calls() -> None:
    store, probe = GatedCommits(), Probe()
    model = ScriptedModel([tool_step(("probe", {}), ("probe", {}))])
    async with open_agent(model, tools=[probe], session=live(store)) as agent:
        store.gate = gate = trio.Event()
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        assert probe.calls == 0
        assert store.commits == 1  # one commit for both calls of the step
        assert [r.type for r in agent.session.records].count("tool/call") == 2
        gate.set()
        await agent.wait_idle()
        assert probe.calls == 2
        assert store.commits == 2  # and one before the agent went idle


async def test_a_cancel_during_the_commit_starts_no_tool() -> None:
    store, probe = GatedCommits(), Probe()
    model = ScriptedModel([tool_step(("probe", {}))])
    async with open_agent(model, tools=[probe], session=live(store)) as agent:
        store.gate = gate = trio.Event()
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        assert store.commits == 1
        assert agent.cancel("stop")
        gate.set()
        await agent.wait_idle()
        assert probe.calls == 0
        [result] = [r for r in agent.session.records if r.type == "tool/result"]
        assert result.data["interrupted"] is True
        end = agent.session.records[-1]
        assert end.type == "turn/end"
        assert end.data["reason"]["kind"] == "aborted"


async def test_a_store_that_cannot_commit_stops_the_loop_before_any_tool() -> None:
    store, probe = GatedCommits(), Probe()
    store.broken = True
    model = ScriptedModel([tool_step(("probe", {}))])
    with pytest.RaisesGroup(PersistenceError, flatten_subgroups=True) as raised:
        async with open_agent(model, tools=[probe], session=live(store)) as agent:
            agent.send("go")
            await agent.wait_idle()
    assert probe.calls == 0
    [error] = raised.value.exceptions
    assert "could not be committed" in str(error)
    assert isinstance(error.__cause__, StoreBrokenError)


async def test_a_store_that_cannot_tell_is_asked_once_per_settle_not_in_a_loop() -> None:
    class Silent(MemoryStore):
        flushes = 0

        def _committed_all(self, session: Session) -> bool:
            return False  # what a store that does not override the hook says

        async def flush(self, session: Session) -> None:
            Silent.flushes += 1
            await trio.lowlevel.checkpoint()

    store = Silent()
    async with open_agent(ScriptedModel(), session=live(store)) as agent:
        await agent.wait_idle()
        before = Silent.flushes
        agent.send("go")
        await agent.wait_idle()
        assert Silent.flushes == before + 1
